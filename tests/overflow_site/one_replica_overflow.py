"""Overflows one replica's float16 step alone: replica 1's gradients (in a
2-worker multi_worker_mirrored cluster, worker 1's) are made non-finite at
one step, the other replica's stay finite. test_loss_scale.py patches it
into its in-process run; the cluster tasks' sitecustomize into theirs."""

import tensorflow as tf

# test_loss_scale.py's FEW_OVERFLOWS_SCALE (why 2**23: there): the first
# float16 steps overflow.
INITIAL_SCALE = 2.0**23
# The global step before the step that overflows on replica 1 alone: the
# 4th, which at the scale the first 3 leave (2**20) overflows nowhere else.
STEP = 3


def overflowing(unscaled):
  """V1LossScale.unscaled, its result non-finite on replica 1 at STEP."""
  def wrapped(self, gradients):
    gradients = unscaled(self, gradients)
    overflow = tf.logical_and(
        tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group,
                 1),
        tf.equal(tf.compat.v1.train.get_global_step(), STEP))
    factor = tf.where(overflow, float('inf'), 1.0)
    return [None if gradient is None else
            gradient * tf.cast(factor, gradient.dtype)
            for gradient in gradients]
  return wrapped


def patch(loss_scale):
  """Patches the module estimator_trainer.loss_scale."""
  loss_scale.INITIAL_SCALE = INITIAL_SCALE
  loss_scale.V1LossScale.unscaled = overflowing(
      loss_scale.V1LossScale.unscaled)
