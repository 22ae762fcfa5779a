"""Dynamic loss scaling for --precision=mixed_float16, one recipe for every
engine: Keras's LossScaleOptimizer in the TF2 engines, `V1LossScale` (its
equivalent) in the estimator engine's v1 graph.

The recipe is Keras's: the loss is multiplied by the scale (2**15 at
first) before differentiation and the gradients divided by it after; a
step whose summed gradients are not all finite applies nothing and halves
the scale; GROWTH_STEPS finite steps in a row double it. A skipped step
still counts as a step (the optimizer's `iterations`, the global step), as
Keras's `do_not_apply_fn` counts it, so --train_steps counts the same
steps in every engine.
"""

import functools

import tensorflow as tf

from estimator_trainer import gradients as gradients_lib

INITIAL_SCALE = 2.0**15
GROWTH_STEPS = 2000

FLOAT16 = 'mixed_float16'


def keras(optimizer, precision):
  """`optimizer` (Keras), wrapped for dynamic loss scaling under
  mixed_float16 (the scale is then in its checkpoint)."""
  if precision != FLOAT16:
    return optimizer
  return tf.keras.mixed_precision.LossScaleOptimizer(
      optimizer, initial_scale=INITIAL_SCALE,
      dynamic_growth_steps=GROWTH_STEPS)


def is_scaled(optimizer):
  return isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)


def _all_finite(gradients):
  return tf.reduce_all([tf.reduce_all(tf.math.is_finite(gradient))
                        for gradient in gradients if gradient is not None])


class V1LossScale:
  """Keras's dynamic loss scale in a v1 graph (the estimator engine's
  model_fn): call in replica context, once per graph, before the steps.

  Its variables `mixed_float16/{loss_scale,good_steps,skipped_steps}` are
  global variables: checkpointed, so a resume keeps the scale.
  """

  def __init__(self):
    def variable(name, initial, dtype):
      # Named apart from the summaries, which take the plain names.
      return tf.compat.v1.get_variable(
          f'{FLOAT16}/{name}', dtype=dtype,
          initializer=tf.constant(initial, dtype), trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.scale = variable('loss_scale', INITIAL_SCALE, tf.float32)
    self._good_steps = variable('good_steps', 0, tf.int64)
    self.skipped_steps = variable('skipped_steps', 0, tf.int64)

  def scaled(self, loss):
    return loss * tf.cast(self.scale, loss.dtype)

  def unscaled(self, gradients):
    """`gradients` of the scaled loss, divided by the scale."""
    return [None if gradient is None else gradient / self.scale
            for gradient in gradients]

  def apply(self, gradients, apply_fn, global_step, optimizers,
            norm_of_sum=None):
    """Applies `gradients` (unscaled) with `apply_fn(gradients,
    apply_gradients)` (which applies each optimizer's pairs with
    `apply_gradients(optimizer, pairs, global_step=None)` and counts the
    step) when the replicas' gradients are all finite; else counts the step
    in `global_step` (None: counted already, claimed before) and in
    `optimizers`' own counts, and skips it.
    `norm_of_sum`: the replicas' summed gradient's norm, if the caller has
    it. Call in replica context; returns the train op."""
    context = tf.distribute.get_replica_context()
    if norm_of_sum is None and _replicas_elsewhere(context):
      # Other processes' replicas too (multi_worker_mirrored): any overflow
      # makes the sum's norm non-finite on every replica alike.
      norm_of_sum = gradients_lib.norm_of_sum(gradients)
    finite = (_all_finite(gradients) if norm_of_sum is None else
              tf.math.is_finite(norm_of_sum))
    return context.merge_call(
        functools.partial(self._update, apply_fn=apply_fn,
                          global_step=global_step, optimizers=optimizers),
        args=(finite, gradients))

  def _update(self, strategy, finite, gradients, apply_fn, global_step,
              optimizers):
    # The cond in cross-replica context (as Keras's LossScaleOptimizer
    # has it): a strategy takes no merge_call inside a replica's cond
    # branch, so the optimizers apply the replicas' gradients from here,
    # as their apply_gradients' own merge_call would.
    # Any replica's overflow overflows the sum: one decision for all, from
    # every replica's finiteness, which this process holds (or, with
    # replicas in other processes, each the sum's).
    finite = tf.reduce_all(tf.stack(
        strategy.experimental_local_results(finite)))

    def apply_gradients(optimizer, pairs, global_step=None):
      if tf.distribute.has_strategy():
        return optimizer._distributed_apply(  # pylint: disable=protected-access
            strategy, pairs, global_step)
      return optimizer.apply_gradients(pairs, global_step=global_step)

    def apply():
      with tf.control_dependencies([apply_fn(gradients, apply_gradients)]):
        good = self._good_steps + 1
        grow = good >= GROWTH_STEPS
        return tf.group(
            self._good_steps.assign(tf.where(grow, tf.constant(0, tf.int64),
                                             good)),
            self.scale.assign(tf.where(grow, self.scale * 2.0, self.scale)))

    def skip():
      return tf.group(*([] if global_step is None else
                        [global_step.assign_add(1)]),
                      *(_count_step(optimizer) for optimizer in optimizers),
                      self._good_steps.assign(0),
                      self.scale.assign(self.scale / 2.0),
                      self.skipped_steps.assign_add(1))

    return tf.cond(finite, apply, skip)


def _replicas_elsewhere(context):
  """Whether some of the replicas in sync are in other processes."""
  return context.num_replicas_in_sync > 1 and (
      context.num_replicas_in_sync > len(
          context.strategy.extended.worker_devices))


def _count_step(optimizer):
  """A skipped step counted by a v1 `optimizer` too: Adam's bias correction
  (its beta powers) advances, as Keras's optimizers count a skipped step in
  the `iterations` their Adam corrects by. (Built after the apply branch,
  which creates the powers.) The others keep no count."""
  if not isinstance(optimizer, tf.compat.v1.train.AdamOptimizer):
    return tf.no_op()
  # pylint: disable=protected-access
  beta1_power, beta2_power = optimizer._get_beta_accumulators()
  return tf.group(
      beta1_power.assign(beta1_power * optimizer._call_if_callable(
          optimizer._beta1)),
      beta2_power.assign(beta2_power * optimizer._call_if_callable(
          optimizer._beta2)))
