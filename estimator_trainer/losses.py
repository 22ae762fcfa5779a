"""Per-example loss and the sum-over-global-batch scaling.

This is the one place loss scaling lives. Each replica's training loss is its
per-example losses summed and divided by the GLOBAL batch, so summing the
replicas' gradients (what every strategy's all-reduce does) gives the gradient
of the mean over the global batch, whatever the replica count.
"""

import tensorflow as tf


def per_example_loss(labels, logits):
  """Sparse softmax cross-entropy, one value per example (no reduction)."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                        logits=logits)


def num_replicas_in_sync():
  """Replicas whose gradients get summed: the same in a replica context,
  in a strategy's cross-replica context and with no strategy (1)."""
  replica_context = tf.distribute.get_replica_context()
  if replica_context is not None:
    return replica_context.num_replicas_in_sync
  return tf.distribute.get_strategy().num_replicas_in_sync


def replica_training_loss(labels, logits, global_batch_size,
                          regularization_losses=()):
  """This replica's share of the global-batch mean loss.

  Regularization is divided by the replica count so that it is counted once
  after the replicas' gradients are summed.
  """
  # What tf.nn.compute_average_loss computes; called directly it leaves
  # unused assert ops in Estimator's graph, which TensorFlow reports as an
  # error with a stack trace on every run.
  loss = tf.reduce_sum(per_example_loss(labels, logits)) / global_batch_size
  if regularization_losses:
    loss += tf.add_n(regularization_losses) / num_replicas_in_sync()
  return loss


def weighted_mean_loss(labels, logits, weights):
  """The mean per-example loss of a (possibly padded) evaluation batch."""
  losses = per_example_loss(labels, logits)
  return tf.math.divide_no_nan(tf.reduce_sum(losses * weights),
                               tf.reduce_sum(weights))
