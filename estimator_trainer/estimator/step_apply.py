"""A training step's update in the estimator engine's v1 graph: its
gradients applied by each optimizer (loss scale, clipping) and counted on
the global step; under parameter servers, the count claimed first, so that
asynchronous workers stop at max_steps exactly.

Canned Estimators' workers each stop once StopAtStepHook sees max_steps
after their own step: two workers stepping from max_steps - 1 both apply
theirs, and training ends past max_steps (3001 of 3000 in 2 of 5 runs of
scripts/chaos_cluster.py). A StepClaim's step first claims its count on
the global step's parameter server in one atomic op (ResourceCountUpTo:
+1, refused at max_steps), then applies its gradients without counting
again. The count never passes max_steps, not even for a moment (an
increment undone after the fact would let a checkpoint, StopAtStepHook or
the evaluator read max_steps + 1), and it needs no counter beside the
global step: a parameter server restarted from a checkpoint restores the
count with the weights it counts. A refused claim fails its session.run
with OutOfRangeError before any update is applied (but batch norm's
moving statistics, which its forward pass updated before the claim:
resnet20's), and MonitoredSession ends training on it as at the end of the
input (its hooks' end() run).
"""

import tensorflow as tf

from estimator_trainer import gradients as gradients_lib
from estimator_trainer import optimizers


class StepClaim:
  """Each step's count claimed on the global step before its update, up to
  `max_steps`. `step()` is the step a learning rate is of: the claimed
  count, the global step before this step, as a rate read before an
  unclaimed step's count is."""

  def __init__(self, max_steps):
    self._max_steps = max_steps
    self._claimed = None

  def step(self):
    if self._claimed is None:
      raise ValueError('StepClaim.step() before claim()')
    return self._claimed

  def claim(self, gradients):
    """Claims this step's count once `gradients` are computed (the count
    then runs ahead of the weights only while they are applied), once for
    all the replicas; returns the claimed count (int64)."""
    global_step = tf.compat.v1.train.get_or_create_global_step()

    def claim_once(strategy):
      counts = strategy.extended.update(
          global_step, lambda step: tf.raw_ops.ResourceCountUpTo(
              resource=step.handle, limit=self._max_steps, T=step.dtype),
          group=False)
      return tf.nest.flatten(counts)[0]

    with tf.control_dependencies([
        gradient.values if isinstance(gradient, tf.IndexedSlices) else
        gradient for gradient in gradients if gradient is not None]):
      self._claimed = tf.distribute.get_replica_context().merge_call(
          claim_once)
    return self._claimed


def train_op(parts, gradients, clip_norm=None, loss_scale=None,
             counted=False):
  """Applies `gradients` (of optimizers.variables_of(parts), of a loss
  already per global batch, multiplied by `loss_scale`'s scale when given:
  a V1LossScale) with each optimizer of `parts` (optimizers.by_part) to its
  variables; the last one counts the global step, unless the step is
  `counted` already (StepClaim). With `clip_norm`, the replicas' summed
  gradient is clipped to that global norm. Returns (the op, that norm
  before clipping or None).

  Gradients not of `optimizer.minimize`: under Estimator its
  `compute_gradients` divides the loss again by the replica count
  (`Optimizer._scale_loss`, tensorflow#35333). `apply_gradients` sums the
  replicas' gradients, which is right for a loss divided by the global
  batch; so clipping scales each replica's share (gradients.clip_shares).
  An overflow makes the clipped gradients NaN: the loss scale skips the
  step.
  """
  global_step = (None if counted else
                 tf.compat.v1.train.get_or_create_global_step())
  if loss_scale:
    gradients = loss_scale.unscaled(gradients)
  norm = None
  if clip_norm is not None:
    gradients, norm = gradients_lib.clip_shares(gradients, clip_norm)

  def apply(gradients, apply_gradients=_apply_gradients):
    *others, (optimizer, pairs) = optimizers.per_part(parts, gradients)
    updates = [apply_gradients(other, other_pairs)
               for other, other_pairs in others]
    with tf.control_dependencies(updates):
      return apply_gradients(optimizer, pairs, global_step=global_step)

  if loss_scale:
    return loss_scale.apply(gradients, apply, global_step,
                            [optimizer for optimizer, _ in parts],
                            norm), norm
  return apply(gradients), norm


def _apply_gradients(optimizer, pairs, global_step=None):
  return optimizer.apply_gradients(pairs, global_step=global_step)
