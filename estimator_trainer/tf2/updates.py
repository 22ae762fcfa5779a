"""A TF2 engine's optimizer step on a replica, the same in ctl's loop and
Keras fit's `train_step`: the gradients of a loss (unscaled under
mixed_float16), summed over the step's micro-batches, then applied by
each part's optimizer, clipped after the replicas' sum
(--clip_global_norm), followed by the moving average (--ema_decay) and the
count of steps skipped on overflow.
"""

import tensorflow as tf

from estimator_trainer import gradients as gradients_lib
from estimator_trainer import loss_scale
from estimator_trainer import optimizers


class Updates:
  """The step's gradients and updates for a Job's `optimizer_parts`, `ema`
  and `skipped_steps`; call in replica context."""

  def __init__(self, job):
    self._parts = job.optimizer_parts
    self._clip_norm = job.config.clip_global_norm
    self._ema = job.ema
    self._skipped_steps = job.skipped_steps
    self._scaled = loss_scale.is_scaled(job.optimizer)  # mixed_float16

  def step(self, micro_batches, loss_of):
    """One optimizer step on `micro_batches` (this replica's): the sum of
    the gradients of `loss_of(micro_batch)` (its loss per global batch
    divided by their count; called inside the tape), applied. Returns (the
    summed loss, the summed gradient's norm before clipping or None)."""
    gradients = [None] * len(optimizers.variables_of(self._parts))
    total = 0.0
    for micro_batch in micro_batches:
      # Persistent when each part differentiates its own scaled loss.
      with tf.GradientTape(
          persistent=self._scaled and len(self._parts) > 1) as tape:
        loss = loss_of(micro_batch)
        scaled_losses = self._scaled and [optimizer.get_scaled_loss(loss)
                                          for optimizer, _ in self._parts]
      gradients = [gradients_lib.add(sum_, gradient) for sum_, gradient in
                   zip(gradients, self._gradients(tape, loss, scaled_losses))]
      total += loss
    return total, self._apply(gradients)

  def _gradients(self, tape, loss, scaled_losses):
    """`tape`'s gradients of `loss` for the parts' variables (under
    mixed_float16 those of each part's scaled loss, unscaled: each part's
    optimizer keeps its own scale)."""
    if not scaled_losses:
      return tape.gradient(loss, optimizers.variables_of(self._parts))
    return [gradient for (optimizer, variables), scaled_loss in zip(
        self._parts, scaled_losses) for gradient in optimizer.get_unscaled_gradients(
            tape.gradient(scaled_loss, variables))]

  def _apply(self, gradients):
    """Applies this replica's `gradients` (of a loss per global batch); returns
    the global norm of the replicas' summed gradient before clipping, or None
    without --clip_global_norm."""
    # Keras's apply_gradients sums the replicas' gradients (right for a loss
    # per global batch) unless they are summed here, to clip the sum (an
    # overflow then is NaN on every replica: each skips the step).
    norm = None
    summed = self._clip_norm is not None
    if summed:
      gradients, norm = gradients_lib.clip_summed(gradients, self._clip_norm)
    counter = self._parts[-1][0]  # The optimizer that counts steps.
    before = self._skipped_steps is not None and counter.loss_scale
    for optimizer, pairs in optimizers.per_part(self._parts, gradients):
      optimizer.apply_gradients(pairs, skip_gradients_aggregation=summed)
    # In a tf.function: ordered after the updates they read.
    context = tf.distribute.get_replica_context()
    if self._skipped_steps is not None:
      # A skipped step halves the scale.
      context.merge_call(lambda _: self._skipped_steps.assign_add(
          tf.cast(counter.loss_scale < before, tf.int64)))
    if self._ema:
      context.merge_call(lambda _: self._ema.update(counter.iterations))
    return norm
