"""--ema_decay in the estimator engine's graphs: ema_recipe.py's recipe, as
in the TF2 engines, in variables named as
tf.compat.v1.train.ExponentialMovingAverage names them
(`<weight>/ExponentialMovingAverage`). The EVAL and PREDICT graphs'
models (evaluation and exports) have their trainable weights under those
names, so the checkpoint's averages load into them.
"""

import tensorflow as tf

from estimator_trainer import ema_recipe
from estimator_trainer.layout import AVERAGE_SUFFIX


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


def _named_as_average(next_creator, **kwargs):
  if kwargs.get('trainable', True):
    kwargs['name'] = f'{kwargs["name"]}/{AVERAGE_SUFFIX}'
  return next_creator(**kwargs)


def reading_averages():
  """A context in which a model built gets its trainable weights (those
  averaged) named as their averages: the graph's own Saver then restores
  the averages into them. (A Saver mapping the names, made in a replica's
  context, left --eval_strategy=mirrored's weights unrestored.)"""
  return tf.variable_creator_scope(_named_as_average)
