"""Batch norm's population statistics: recomputed over training batches
(precise BN), and a warning when a momentum leaves them stale.

Keras's moving statistics are exponential averages from mean 0 and variance
1: with momentum m they keep m**steps of those initial values. Keras
Applications use m = 0.999, which after 300 steps keeps 74 % of them, so a
model that trains well evaluates at chance. `--bn_recompute_batches=N`
replaces them, before each checkpoint save, with the population statistics
of N training batches, as pycls (`compute_precise_bn_stats`) and detectron2
(`update_bn_stats`) do: each batch runs forward in training mode, every
batch-norm layer normalizing with its batch's mean and (biased) variance;
the batches' means and variances are averaged equally, and the variance is
pycls's E[x^2] - E[x]^2 over all N batches (the mean of the batch variances
plus the variance of the batch means; detectron2 keeps only the former).

A batch here is a global batch, computed whole on this process's own
device: its statistics are the global batch's whatever the strategy and
replica count (1 and 2 replicas give the same), and every training task of
a TF2 cluster computes the same numbers from the same batches and weights
(the estimator engine recomputes on the chief, which saves).
"""

import contextlib
import logging

import numpy as np
import tensorflow as tf

from estimator_trainer.errors import UsageError

_logger = logging.getLogger(__name__)

# momentum**steps above this: the moving statistics are still mostly their
# initial values at the end of the run.
STALE_FRACTION = 0.5
# A `staleness` above this at the end of training: the warning.
FAR = 0.5
# Training batches the end-of-training check measures.
CHECK_BATCHES = 4


def layers(model):
  """The model's BatchNormalization layers that train (nested models
  included): a frozen one (trainable=False) normalizes with its moving
  statistics even in training, and keeps them."""
  return [module for module in model.submodules
          if isinstance(module, tf.keras.layers.BatchNormalization) and
          module.trainable]


def check(model):
  """Raises UsageError for a layer that precise BN cannot recompute."""
  for layer in layers(model):
    for what in ('renorm', 'virtual_batch_size', 'adjustment'):
      if getattr(layer, what):
        raise UsageError(f'--bn_recompute_batches: batch-norm layer '
                         f'{layer.name} uses {what}, which it cannot '
                         'recompute')


def warn_if_stale(model, train_steps):
  """Warns (one line) when the layers' momentum leaves their moving
  statistics mostly at their initial values after `train_steps` steps;
  returns whether it did."""
  momenta = sorted({layer.momentum for layer in layers(model)})
  left = momenta[-1]**train_steps if momenta else 0
  if left > STALE_FRACTION:
    _logger.warning(
        'Batch norm momentum %s leaves the moving statistics %.0f %% at '
        'their initial values after %d training steps (momentum**steps): '
        'evaluation and export would normalize with them; '
        '--bn_recompute_batches=N recomputes them over N training batches '
        'before each checkpoint', ', '.join(f'{m:g}' for m in momenta),
        100 * left, train_steps)
  return left > STALE_FRACTION


@contextlib.contextmanager
def _recording(bn_layers, moments):
  """While entered, each layer of `bn_layers` normalizes with its batch's
  mean and variance, as in training but in float32 and without updating its
  moving statistics, and appends (mean, variance) to `moments[i]`."""
  def batch_norm(index, layer):
    def call(inputs, training=None, mask=None):
      del training  # Always the batch's statistics.
      if mask is not None:
        raise UsageError(f'--bn_recompute_batches: batch-norm layer '
                         f'{layer.name} is called with a mask')
      x = tf.cast(inputs, tf.float32)
      rank = x.shape.rank
      axes = [axis % rank for axis in layer.axis]
      mean, variance = tf.nn.moments(
          x, [i for i in range(rank) if i not in axes], keepdims=True)
      moments[index].append((tf.reshape(mean, [-1]),
                             tf.reshape(variance, [-1])))
      shape = mean.shape
      gamma, beta = (None if weight is None else
                     tf.reshape(tf.cast(weight, tf.float32), shape)
                     for weight in (layer.gamma, layer.beta))
      return tf.cast(tf.nn.batch_normalization(x, mean, variance, beta,
                                               gamma, layer.epsilon),
                     inputs.dtype)
    return call

  for index, layer in enumerate(bn_layers):
    # An instance attribute: Keras's __call__ calls `self.call`.
    object.__setattr__(layer, 'call', batch_norm(index, layer))
  try:
    yield
  finally:
    for layer in bn_layers:
      object.__delattr__(layer, 'call')


def staleness(bn_layers, moving, statistics):
  """How far evaluation's normalization is from training's, per layer.

  `moving` and `statistics`: [(mean, variance)] numpy, the layers' moving
  statistics and their inputs' population statistics over training batches.
  Normalized with the moving ones, a channel of the training data comes out
  with mean d = (mean - moving_mean) / moving_std and standard deviation
  s = std / moving_std instead of 0 and 1; the distance between the two
  normals (2-Wasserstein, in training's standard deviations) is
  sqrt(d**2 + (s - 1)**2). Returns {layer name: its root mean square over
  the layer's channels}.
  """
  result = {}
  for layer, (moving_mean, moving_variance), (mean, variance) in zip(
      bn_layers, moving, statistics):
    moving_std = np.sqrt(moving_variance + layer.epsilon)
    shift = (mean - moving_mean) / moving_std
    scale = np.sqrt(variance + layer.epsilon) / moving_std
    result[layer.name] = float(np.sqrt(np.mean(shift**2 + (scale - 1)**2)))
  return result


def warn_if_far(distances, step):
  """The measured warning: the moving statistics at the end of training
  (`staleness`) against the training data's."""
  name, worst = max(distances.items(), key=lambda item: item[1])
  _logger.info('Batch norm at step %d: moving statistics %.2f standard '
               'deviations from the training data\'s at most (%s)', step,
               worst, name)
  if worst > FAR:
    _logger.warning(
        'Batch norm moving statistics at step %d are %.2f standard '
        'deviations from the training data\'s (layer %s): evaluation and '
        'export normalize with them and may be far worse than training; '
        '--bn_recompute_batches=N recomputes them over N training batches '
        'before each checkpoint', step, worst, name)


def population_statistics(model, bn_layers, dataset, num_batches):
  """[(mean, variance)] float64 of each of `bn_layers`' inputs over the
  first `num_batches` batches of `dataset` (the model's inputs of a global
  batch each), each batch forward in training mode. Call it inside a
  tf.function (or a graph)."""
  # Per layer: the sums of the batches' means, variances and squared means.
  # Tuples: autograph would take lists in a loop for tensor lists.
  sums = tuple((tf.zeros(layer.moving_mean.shape, tf.float64),) * 3
               for layer in bn_layers)
  for inputs in dataset.take(num_batches):
    moments = [[] for _ in bn_layers]
    with _recording(bn_layers, moments):
      model(inputs, training=True)
    for layer, found in zip(bn_layers, moments):
      if len(found) != 1:
        raise UsageError(f'--bn_recompute_batches: batch-norm layer '
                         f'{layer.name} is called {len(found)} times in '
                         'one forward pass')
    sums = tuple(_add(layer_sums, *found[0])
                 for layer_sums, found in zip(sums, moments))
  statistics = []
  for sum_mean, sum_variance, sum_square_mean in sums:
    mean = sum_mean / num_batches
    # E[x^2] - E[x]^2: the batch variances' mean plus the batch means'
    # variance (in float64: the difference of squares cancels).
    statistics.append((mean, sum_variance / num_batches +
                       sum_square_mean / num_batches - tf.square(mean)))
  return statistics


def _add(sums, mean, variance):
  mean, variance = tf.cast(mean, tf.float64), tf.cast(variance, tf.float64)
  return (sums[0] + mean, sums[1] + variance, sums[2] + tf.square(mean))


def assign(bn_layers, statistics):
  """Ops (or, eagerly, the assignments) writing `statistics` into the
  layers' moving mean and variance (every replica's copy)."""
  return [variable.assign(tf.cast(value, variable.dtype))
          for layer, values in zip(bn_layers, statistics)
          for variable, value in zip(
              (layer.moving_mean, layer.moving_variance), values)]


class Recompute:
  """Precise BN of an eagerly built model (the TF2 engines): calling it
  writes the population statistics of the first `num_batches` batches of
  `make_dataset()` (the model's inputs of global batches of training data,
  in their seeded order: the same batches at every call) into the moving
  statistics;
  `check(step)` only compares them with the moving ones (`warn_if_far`)."""

  def __init__(self, model, make_dataset, num_batches, recompute=True):
    if recompute:
      check(model)
    self._layers = layers(model)
    self._statistics = tf.function(lambda: population_statistics(
        model, self._layers, make_dataset(), num_batches))
    self._num_batches = num_batches

  def __call__(self):
    assign(self._layers, self._statistics())
    _logger.info('Recomputed the moving statistics of %d batch-norm layers '
                 'over %d training batches', len(self._layers),
                 self._num_batches)

  def check(self, step):
    """The measured warning (`warn_if_far`); nothing for a model whose
    batch norm it cannot measure."""
    try:
      statistics = self._statistics()
    except UsageError:
      return
    moving = [(layer.moving_mean.numpy(), layer.moving_variance.numpy())
              for layer in self._layers]
    warn_if_far(staleness(self._layers, moving, [
        (mean.numpy(), variance.numpy()) for mean, variance in statistics]),
                step)
