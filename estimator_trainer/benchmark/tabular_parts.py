"""The package's tabular training split into its parts (issue 34's profile
of where the engines' time goes), on the census workload's `setup`
(`runs.census_setup`):

  tabular_input   the engines' TRAIN input_fn (read, shuffle, batch, parse
                  and encode), each batch reduced in the graph to a scalar
                  that needs all of it, no model;
  tabular_read,   the same input_fn cut after its batches of records, or
  tabular_parse   after parsing them (`input.STAGES`): with tabular_input,
                  where its time goes (reading, parsing, preprocessing);
  tabular_encode  the engines' preprocessing (the Encoder) alone on ONE
                  parsed batch already in memory: with tabular_read and
                  tabular_input, parsing's share is the rest;
  tabular_step    the engines' model (--model) and optimizer on ONE encoded
                  batch already in memory, `every_steps` steps per
                  tf.function call: the ceiling of any engine.

Each returns {'rates': interval rates}, as `workloads` does for images.
"""

import functools
import tempfile
import time

from estimator_trainer.benchmark.measure import IntervalTimer


def _input(setup, batch_size, model_dir, stage='encode'):
  """(the package's TRAIN dataset at `batch_size` cut at `stage`, its
  TabularData, its TrainConfig)."""
  from estimator_trainer import config as config_lib  # pylint: disable=g-import-not-at-top
  from estimator_trainer import data  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular import dataset  # pylint: disable=g-import-not-at-top
  # The statistics go to model_dir, as an engine's do.
  config = config_lib.TrainConfig(model_dir=model_dir, **setup)
  tabular = dataset.load(config, training=True)
  input_fn = tabular.make_input_fn(config, batch_size, stage=stage)
  return input_fn(data.ModeKeys.TRAIN), tabular, config


def _consumed(*element):
  """A scalar that needs every value of a batch, as the engines' graphs
  consume their batches: no stage hands tensors to Python, and none of its
  work can be pruned (a size alone could be read off a static shape). A
  batch of strings (the parse stage's) still costs more to reduce than
  encoded numbers: tabular_encode times the Encoder apart."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  total = tf.constant(0.0)
  for tensor in tf.nest.flatten(element):
    if tensor.dtype == tf.string:
      tensor = tf.strings.length(tensor)
    total += tf.reduce_sum(tf.cast(tensor, tf.float32))
  return total


def run_input(setup, steps, batch_size, every_steps, stage='encode'):
  with tempfile.TemporaryDirectory() as model_dir:
    train, _, _ = _input(setup, batch_size, model_dir, stage)
    timer = IntervalTimer(batch_size, every_steps)
    for _ in train.map(_consumed).take(steps):
      timer.step()
  return {'rates': timer.rates}


def _rates(steps_fn, steps, batch_size, every_steps):
  """Examples/s of `steps_fn(num_steps)` (a tf.function) every
  `every_steps` steps, once traced."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  steps_fn(tf.constant(1)).numpy()  # Traces.
  rates = []
  for _ in range(steps // every_steps):
    start = time.perf_counter()
    steps_fn(tf.constant(every_steps)).numpy()
    rates.append(every_steps * batch_size / (time.perf_counter() - start))
  return {'rates': rates}


def run_encode(setup, steps, batch_size, every_steps):
  """The Encoder on one parsed batch, reduced as `_consumed` reduces a
  stage's batch."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular.encoder import Encoder  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as model_dir:
    parsed, tabular, _ = _input(setup, batch_size, model_dir, 'parse')
    raw = next(iter(parsed))[0]
    encoder = Encoder(tabular.feature_spec, tabular.statistics)

  @tf.function
  def encode_steps(num_steps):
    total = tf.constant(0.0)
    for _ in tf.range(num_steps):
      total += _consumed(encoder(raw))
    return total

  return _rates(encode_steps, steps, batch_size, every_steps)


def run_step(setup, steps, batch_size, every_steps):
  """Forward, the head's loss, backward and the optimizer's update."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from estimator_trainer import heads  # pylint: disable=g-import-not-at-top
  from estimator_trainer import models as models_lib  # pylint: disable=g-import-not-at-top
  from estimator_trainer import optimizers  # pylint: disable=g-import-not-at-top
  from estimator_trainer.models import tabular as models  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as model_dir:
    train, tabular, config = _input(setup, batch_size, model_dir)
    features, labels = next(iter(train))
  weights = features.pop(
      models_lib.FeatureKeys.of(tabular.spec.model_input).weight, None)
  head = heads.of_data(tabular.spec)
  model = getattr(models, config.model)(tabular.spec.model_input,
                                        head.logits_dimension, seed=0)
  optimizer = optimizers.OptimizerSpec(config.optimizer,
                                       config.learning_rate).keras()

  @tf.function
  def train_steps(num_steps):
    loss = tf.constant(0.0)
    for _ in tf.range(num_steps):
      with tf.GradientTape() as tape:
        loss = head.replica_training_loss(
            labels, model(features, training=True), batch_size,
            weights=weights)
      gradients = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss

  return _rates(train_steps, steps, batch_size, every_steps)


WORKLOADS = {'tabular_input': run_input,
             'tabular_read': functools.partial(run_input, stage='read'),
             'tabular_parse': functools.partial(run_input, stage='parse'),
             'tabular_encode': run_encode,
             'tabular_step': run_step}
