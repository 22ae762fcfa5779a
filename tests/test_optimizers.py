"""One optimizer spec, two builders: Estimator's and the TF2 engines' agree."""

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer.config_optimizers import OPTIMIZERS
from estimator_trainer.optimizers import ADAM_EPSILON, OptimizerSpec

STEPS = (0, 50, 100, 150)


def _v1_learning_rates(spec):
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    learning_rate = spec.v1()[1]()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      values = []
      for value in STEPS:
        sess.run(step.assign(value))
        values.append(sess.run(learning_rate))
  return values


def _keras_learning_rates(spec):
  """The rate Keras applies at each step (a zero-gradient SGD step there:
  the optimizer computes its rate from `iterations` as it applies)."""
  optimizer = spec.keras()
  variable = tf.Variable(1.0)
  values = []
  for step in STEPS:
    optimizer.iterations.assign(step)
    optimizer.apply_gradients([(tf.constant(0.0), variable)])
    values.append(float(optimizer.learning_rate))
  return values


@pytest.mark.parametrize('name, lr_decay, expected', [
    # From the rate to 0 at decay_steps.
    ('sgd', 'cosine', [0.1, 0.05, 0.0, 0.0]),
    ('sgd', 'none', [0.1] * 4),
    # FTRL's weights are its accumulators over the rate: never decayed.
    ('ftrl', 'cosine', [0.1] * 4),
])
def test_both_builders_follow_the_same_schedule(name, lr_decay, expected):
  spec = OptimizerSpec(name, 0.1, lr_decay, decay_steps=100)
  np.testing.assert_allclose(_v1_learning_rates(spec), expected, atol=1e-7)
  np.testing.assert_allclose(_keras_learning_rates(spec), expected,
                             atol=1e-7)


def test_both_builders_make_the_same_algorithm():
  adam = OptimizerSpec('adam', 1e-3)
  with tf.Graph().as_default():
    v1, _ = adam.v1()
  assert isinstance(v1, tf.compat.v1.train.AdamOptimizer)
  assert v1._epsilon == ADAM_EPSILON  # pylint: disable=protected-access
  keras = adam.keras()
  assert isinstance(keras, tf.keras.optimizers.Adam)
  assert keras.epsilon == ADAM_EPSILON
  sgd = OptimizerSpec('sgd', 0.1)
  with tf.Graph().as_default():
    assert isinstance(sgd.v1()[0],
                      tf.compat.v1.train.GradientDescentOptimizer)
  assert isinstance(sgd.keras(), tf.keras.optimizers.SGD)


def _v1_steps(spec, gradients):
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    variable = tf.compat.v1.Variable([1.0, -2.0])
    gradient = tf.compat.v1.placeholder(tf.float32, [2])
    train = spec.v1()[0].apply_gradients([(gradient, variable)],
                                         global_step=step)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for value in gradients:
        sess.run(train, {gradient: value})
      return sess.run(variable)


def _keras_steps(spec, gradients):
  optimizer = spec.keras()
  variable = tf.Variable([1.0, -2.0])
  for value in gradients:
    optimizer.apply_gradients([(tf.constant(value), variable)])
  return variable.numpy()


@pytest.mark.parametrize('name', OPTIMIZERS)
def test_both_builders_step_alike(name):
  """Each --optimizer's v1 and Keras builds take the same steps under the
  cosine schedule (v1 FTRL once failed on the schedule's callable rate)."""
  spec = OptimizerSpec(name, 0.1, 'cosine', decay_steps=6)
  gradients = [[0.5, -1.0], [0.25, 2.0], [-1.0, 0.5], [0.1, 0.1]]
  expected = _keras_steps(spec, gradients)
  assert not np.allclose(expected, [1.0, -2.0])
  np.testing.assert_allclose(_v1_steps(spec, gradients), expected,
                             rtol=1e-5, atol=1e-6)


def test_spec_from_model_fn_params(estimator):
  params = estimator.params.ModelParams.from_dict({'global_batch_size': 64, 'optimizer': 'adam',
                                  'learning_rate': 2e-3, 'decay_steps': 9})
  assert OptimizerSpec.from_params(params) == OptimizerSpec('adam', 2e-3,
                                                            'cosine', 9)


def test_cosine_decay_needs_the_training_steps(estimator):
  with pytest.raises(ValueError, match="lr_decay='cosine' needs decay_steps"):
    OptimizerSpec.from_params(estimator.params.ModelParams.from_dict({'global_batch_size': 8}))


@pytest.mark.parametrize('name', ['adam', 'sgd'])
def test_a_keras_checkpoint_keeps_no_rate_over_the_flags(tmp_path, name):
  """The optimizer saves its step, its slots (not scalars here) and the rate
  it last computed, which its schedule recomputes at every step: no rate,
  beta or epsilon that a resumed run would take over its flags'. From a
  float --learning_rate Keras saved `_learning_rate`, and restored it."""
  optimizer = OptimizerSpec(name, 0.1).keras()
  variable = tf.Variable([1.0, 2.0])
  optimizer.apply_gradients([(tf.constant([0.5, 0.5]), variable)])
  path = tf.train.Checkpoint(optimizer=optimizer).write(str(tmp_path / name))
  scalars = {key.split('/')[1] for key, shape in tf.train.list_variables(path)
             if key.startswith('optimizer/') and not shape}
  assert scalars == {'_iterations', '_current_learning_rate'}


def test_adam_keeps_the_same_float32_moments_in_both_builds():
  """v1's Adam kernel takes 1 - beta in float32 (1 - 0.999f = 0.00099998713),
  Keras's in Python's float64 (0.001): its second moments were 1.3e-5
  apart after one step, the first step's update 6.5e-6, and on the periodic
  embedding's relu units the estimator and ctl engines' losses 1.5e-4
  apart after 40 steps. With beta in float32 in both: the same numbers."""
  spec = OptimizerSpec('adam', 0.02)
  gradients = [[0.0353, -1e-4], [-0.02, 3e-5], [0.5, -2e-4]]
  with tf.Graph().as_default():
    variable = tf.compat.v1.Variable([1.0, -2.0])
    gradient = tf.compat.v1.placeholder(tf.float32, [2])
    optimizer = spec.v1()[0]
    train = optimizer.apply_gradients([(gradient, variable)])
    moments = [optimizer.get_slot(variable, name) for name in ('m', 'v')]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for value in gradients:
        sess.run(train, {gradient: value})
      v1 = sess.run([variable, *moments])
  optimizer = spec.keras()
  variable = tf.Variable([1.0, -2.0])
  for value in gradients:
    optimizer.apply_gradients([(tf.constant(value), variable)])
  # pylint: disable=protected-access
  keras = [variable, optimizer._momentums[0], optimizer._velocities[0]]
  for name, got, expected in zip(('variable', 'm', 'v'), v1, keras):
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6, err_msg=name)
