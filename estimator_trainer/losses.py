"""Per-example loss and the sum-over-global-batch scaling.

This is the one place loss scaling lives. Each replica's training loss is its
per-example losses summed and divided by the GLOBAL batch, so summing the
replicas' gradients (what every strategy's all-reduce does) gives the gradient
of the mean over the global batch, whatever the replica count.
"""

import tensorflow as tf


def per_example_loss(labels, logits, label_smoothing=0.0):
  """Softmax cross-entropy, one value per example (no reduction).

  With `label_smoothing` s, against targets of 1 - s + s/K for the label
  and s/K for each other of the K classes (Keras's and Inception's label
  smoothing); 0 is the plain sparse cross-entropy.
  """
  plain = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                         logits=logits)
  if not label_smoothing:
    return plain
  # The smoothed targets' cross-entropy: (1 - s) of the plain one plus s of
  # the mean over classes of -log softmax.
  uniform = -tf.reduce_mean(tf.nn.log_softmax(logits), axis=-1)
  return (1.0 - label_smoothing) * plain + label_smoothing * uniform


def num_replicas_in_sync():
  """Replicas whose gradients get summed: the same in a replica context,
  in a strategy's cross-replica context and with no strategy (1)."""
  replica_context = tf.distribute.get_replica_context()
  if replica_context is not None:
    return replica_context.num_replicas_in_sync
  return tf.distribute.get_strategy().num_replicas_in_sync


def scaled_to_global_batch(per_example, global_batch_size,
                           regularization_losses=(), weights=None):
  """This replica's share of the global batch's mean of `per_example`
  losses (times `weights` per example, as canned Estimators'
  SUM_OVER_BATCH_SIZE: a weight enters the sum, the divisor stays the
  batch).

  Regularization is divided by the replica count so that it is counted once
  after the replicas' gradients are summed.
  """
  # What tf.nn.compute_average_loss computes; called directly it leaves
  # unused assert ops in Estimator's graph, which TensorFlow reports as an
  # error with a stack trace on every run.
  if weights is not None:
    per_example = per_example * tf.cast(weights, per_example.dtype)
  loss = tf.reduce_sum(per_example) / global_batch_size
  if regularization_losses:
    loss += tf.add_n(regularization_losses) / num_replicas_in_sync()
  return loss


def replica_training_loss(labels, logits, global_batch_size,
                          regularization_losses=(), label_smoothing=0.0):
  """This replica's share of the global-batch mean softmax cross-entropy
  (the training objective: with `label_smoothing`)."""
  return scaled_to_global_batch(
      per_example_loss(labels, logits, label_smoothing), global_batch_size,
      regularization_losses)


def weighted_mean(per_example, weights):
  """The weighted mean of per-example values (0 for no weight)."""
  return tf.math.divide_no_nan(tf.reduce_sum(per_example * weights),
                               tf.reduce_sum(weights))


def weighted_mean_loss(labels, logits, weights):
  """The mean per-example loss of a (possibly padded) evaluation batch:
  the plain cross-entropy, whatever the training's label smoothing."""
  return weighted_mean(per_example_loss(labels, logits), weights)
