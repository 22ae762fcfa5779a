"""--ema_decay in the estimator engine's graphs: ema_recipe.py's recipe, as
in the TF2 engines, in variables named as
tf.compat.v1.train.ExponentialMovingAverage names them
(`<weight>/ExponentialMovingAverage`), so its `variables_to_restore` loads
them into the model of the EVAL and PREDICT graphs (evaluation and
exports)."""

import tensorflow as tf

from estimator_trainer import ema_recipe
from estimator_trainer.layout import AVERAGE_SUFFIX


def _naming(decay):
  return tf.compat.v1.train.ExponentialMovingAverage(decay)


class Average:
  """The averages of `weights` (ema_recipe.averaged's) in a TRAIN graph:
  create once, before the steps."""

  def __init__(self, weights, decay):
    self._weights = weights
    self._decay = decay
    # Of `weight.name`, the same on every replica (its op's is the
    # replica's): ExponentialMovingAverage's average_name otherwise.
    self._averages = [tf.compat.v1.get_variable(
        f'{weight.name.split(":")[0]}/{AVERAGE_SUFFIX}',
        initializer=weight.initial_value,
        trainable=False,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                      for weight in weights]

  def pairs(self):
    """[(average, weight)]."""
    return list(zip(self._averages, self._weights))

  def update(self, step):
    """The op of the average after the step's update; `step` the global
    step then (counted from 1)."""
    return tf.group(*ema_recipe.moved(self._averages, self._weights,
                                      self._decay, step))


def scaffold(weights, decay):
  """An EVAL or PREDICT graph's Scaffold: its `weights` restored from their
  averages."""
  return tf.compat.v1.train.Scaffold(saver=tf.compat.v1.train.Saver(
      _naming(decay).variables_to_restore(weights)))
