"""--ema_decay's recipe, one for every engine (tf2/ema.py and
estimator/moving_average.py keep the averages): after optimizer step
`step` (counted from 1; skipped float16 steps included),
`average = d * average + (1 - d) * weight`, except after step 1, where the
average becomes the weights (Keras's `use_ema` rule: a warm-started run
averages its own weights, not its initializers'). No zero-debiasing and no
warm-up of d.

The average covers the trainable weights only, as Keras's `use_ema` does:
batch norm's moving statistics are not weights that a step moves, and
their average would be of statistics of other weights (with
--bn_recompute_batches, the recompute is of the averages themselves).
"""

import tensorflow as tf


def averaged(model):
  """The weights of `model` that the average covers: its trainable ones,
  in `model.weights` order (as checkpoints name them)."""
  trainable = {id(weight) for weight in model.trainable_weights}
  return [weight for weight in model.weights if id(weight) in trainable]


def moved(averages, weights, decay, step):
  """The ops moving each of `averages` (variables) toward its weight of
  `weights` after optimizer step `step`."""
  decay = tf.where(tf.equal(step, 1), 0.0, decay)
  return [average.assign(decay * average + (1 - decay) *
                         tf.cast(weight, average.dtype))
          for average, weight in zip(averages, weights)]
