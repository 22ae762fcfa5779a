import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import heads
from estimator_trainer import losses

LABELS = tf.constant([0, 3, 9, 1], tf.int64)
LOGITS = tf.random.stateless_normal([4, 10], seed=[1, 2])


def test_replica_loss_is_compute_average_loss_over_the_global_batch():
  expected = tf.nn.compute_average_loss(
      losses.per_example_loss(LABELS, LOGITS), global_batch_size=16)
  actual = losses.replica_training_loss(LABELS, LOGITS, 16)
  assert float(actual) == pytest.approx(float(expected), rel=1e-6)
  # A quarter of the global batch: a quarter of the mean.
  mean = float(tf.reduce_mean(losses.per_example_loss(LABELS, LOGITS)))
  assert float(actual) == pytest.approx(mean / 4, rel=1e-6)


def test_regularization_is_divided_by_the_replicas_in_sync():
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  per_replica = strategy.run(
      lambda: losses.replica_training_loss(LABELS, LOGITS, 8,
                                           [tf.constant(2.0)]))
  total = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
  cross_entropy = float(tf.reduce_sum(losses.per_example_loss(LABELS, LOGITS)))
  # Both replicas saw the same 4 examples: 2 x 4 = the global batch of 8.
  assert float(total) == pytest.approx(cross_entropy / 4 + 2.0, rel=1e-6)


def test_weighted_mean_ignores_padding():
  weights = tf.constant([1.0, 1.0, 0.0, 0.0])
  per_example = losses.per_example_loss(LABELS, LOGITS).numpy()
  assert float(losses.weighted_mean_loss(LABELS, LOGITS, weights)) == (
      pytest.approx(np.mean(per_example[:2]), rel=1e-6))
  assert float(losses.weighted_mean_loss(LABELS, LOGITS, weights * 0)) == 0.0


def test_replica_count_is_the_same_in_and_out_of_a_replica_context():
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  assert losses.num_replicas_in_sync() == 1  # No strategy.
  with strategy.scope():  # Cross-replica context.
    assert losses.num_replicas_in_sync() == 2
    in_replica = strategy.run(
        lambda: tf.constant(losses.num_replicas_in_sync()))
  assert strategy.experimental_local_results(in_replica) == (2, 2)
  # The loss helper too: the same value built in either context.
  with strategy.scope():
    outside = losses.replica_training_loss(LABELS, LOGITS, 8,
                                           [tf.constant(2.0)])
  inside = strategy.run(lambda: losses.replica_training_loss(
      LABELS, LOGITS, 8, [tf.constant(2.0)]))
  for value in strategy.experimental_local_results(inside):
    assert float(value) == pytest.approx(float(outside), rel=1e-6)


@pytest.mark.parametrize('smoothing', [0.0, 0.1, 0.3])
def test_label_smoothing_is_keras_label_smoothing(smoothing):
  keras = tf.keras.losses.CategoricalCrossentropy(
      from_logits=True, label_smoothing=smoothing,
      reduction=tf.keras.losses.Reduction.NONE)
  expected = keras(tf.one_hot(LABELS, 10), LOGITS).numpy()
  actual = losses.per_example_loss(LABELS, LOGITS, smoothing).numpy()
  np.testing.assert_allclose(actual, expected, rtol=1e-5)


def test_label_smoothing_enters_the_training_loss_not_the_eval_loss():
  plain = losses.per_example_loss(LABELS, LOGITS).numpy()
  smoothed = losses.per_example_loss(LABELS, LOGITS, 0.1).numpy()
  assert not np.allclose(plain, smoothed)
  assert float(losses.replica_training_loss(
      LABELS, LOGITS, 8, label_smoothing=0.1)) == pytest.approx(
          smoothed.sum() / 8, rel=1e-6)
  weights = tf.ones([4])
  assert float(losses.weighted_mean_loss(LABELS, LOGITS, weights)) == (
      pytest.approx(plain.mean(), rel=1e-6))


def test_keras_loss_in_fit_is_the_replica_loss_summed_over_replicas():
  # One Model.fit step on 2 replicas, then the same step by hand: the
  # replicas' shares of the smoothed loss per global batch, summed.
  # Reduced on one device: the collective all-reduces of strategies made
  # earlier in the same test process can collide with this one's keys.
  strategy = tf.distribute.MirroredStrategy(
      ['/cpu:0', '/cpu:1'],
      cross_device_ops=tf.distribute.ReductionToOneDevice())
  images = tf.random.stateless_normal([8, 5], seed=[3, 4])
  labels = tf.constant([0, 1, 2, 3, 4, 5, 6, 7], tf.int64)

  def make_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(
        10, kernel_initializer=tf.keras.initializers.Constant(0.1))])
    model.build([None, 5])
    return model

  with strategy.scope():
    model = make_model()
    model.compile(optimizer=tf.keras.optimizers.SGD(1.0),
                  loss=heads.make('multiclass', tuple('0123456789'),
                                    label_smoothing=0.2).keras_loss())
  model.fit(tf.data.Dataset.from_tensor_slices((images, labels)).batch(8),
            epochs=1, verbose=0)

  reference = make_model()
  with tf.GradientTape() as tape:
    logits = reference(images)
    loss = sum(losses.replica_training_loss(labels[half], logits[half], 8,
                                            label_smoothing=0.2)
               for half in (slice(0, 4), slice(4, 8)))
  gradients = tape.gradient(loss, reference.trainable_variables)
  tf.keras.optimizers.SGD(1.0).apply_gradients(
      zip(gradients, reference.trainable_variables))
  for trained, expected in zip(model.weights, reference.weights):
    np.testing.assert_allclose(trained.numpy(), expected.numpy(), rtol=1e-5,
                               atol=1e-6)
