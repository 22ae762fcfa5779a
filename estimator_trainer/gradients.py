"""A step's gradient in every engine: summed over micro-batches
(--accumulate_steps) and over the replicas, clipped by the global norm of
that sum (--clip_global_norm).

Clipping each replica's gradient before the optimizer sums them (Keras's
clipnorm under a strategy, tensorflow#33929; a replica's share of the global
batch under Estimator, #35333) would make the threshold mean something else
for every replica count: here the norm is always the summed gradient's.
"""

import tensorflow as tf


def add(a, b):
  """The sum of two gradients of a variable (None: no gradient); sparse ones
  (embedding lookups) stay sparse, their rows concatenated."""
  if a is None or b is None:
    return b if a is None else a
  if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
    return tf.IndexedSlices(tf.concat([a.values, b.values], 0),
                            tf.concat([a.indices, b.indices], 0),
                            a.dense_shape)
  return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)


def _deduplicated(gradient):
  """A sparse gradient with each row once (its norm is the dense one's)."""
  if not isinstance(gradient, tf.IndexedSlices):
    return gradient
  indices, positions = tf.unique(gradient.indices)
  values = tf.math.unsorted_segment_sum(gradient.values, positions,
                                        tf.shape(indices)[0])
  return tf.IndexedSlices(values, indices, gradient.dense_shape)


def _summed_over_replicas(gradients):
  """The replicas' gradients summed (in a replica context), each row of a
  sparse one once."""
  context = tf.distribute.get_replica_context()
  present = [gradient for gradient in gradients if gradient is not None]
  if context is not None and context.num_replicas_in_sync > 1:
    present = context.all_reduce(tf.distribute.ReduceOp.SUM, present)
  present = iter(_deduplicated(gradient) for gradient in present)
  return [None if gradient is None else next(present)
          for gradient in gradients]


def clip_summed(gradients, clip_norm):
  """(the replicas' summed `gradients` clipped to global norm `clip_norm`,
  the sum's global norm): the same on every replica, for an optimizer that
  does not sum them again (Keras's apply_gradients with
  skip_gradients_aggregation=True)."""
  return tf.clip_by_global_norm(_summed_over_replicas(gradients), clip_norm)


def norm_of_sum(gradients):
  """The global norm of the replicas' summed `gradients` (in a replica
  context), the same on every replica. Costs an all-reduce of the
  gradients beside the optimizer's own."""
  return tf.linalg.global_norm(_summed_over_replicas(gradients))


def clip_shares(gradients, clip_norm):
  """(this replica's `gradients` scaled as the replicas' sum is clipped to
  global norm `clip_norm`, the sum's global norm): for an optimizer whose
  apply_gradients sums the replicas' gradients (tf.compat.v1.train's), the
  clipped sum."""
  norm = norm_of_sum(gradients)
  clipped, _ = tf.clip_by_global_norm(gradients, clip_norm, use_norm=norm)
  return clipped, norm
