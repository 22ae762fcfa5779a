import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import losses

LABELS = tf.constant([0, 3, 9, 1], tf.int64)
LOGITS = tf.random.stateless_normal([4, 10], seed=[1, 2])


def test_replica_loss_is_compute_average_loss_over_the_global_batch():
  expected = tf.nn.compute_average_loss(
      losses.per_example_loss(LABELS, LOGITS), global_batch_size=16)
  actual = losses.replica_training_loss(LABELS, LOGITS, 16)
  assert float(actual) == pytest.approx(float(expected), rel=1e-6)
  # A quarter of the global batch: a quarter of the mean.
  mean = float(tf.reduce_mean(losses.per_example_loss(LABELS, LOGITS)))
  assert float(actual) == pytest.approx(mean / 4, rel=1e-6)


def test_regularization_is_divided_by_the_replicas_in_sync():
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  per_replica = strategy.run(
      lambda: losses.replica_training_loss(LABELS, LOGITS, 8,
                                           [tf.constant(2.0)]))
  total = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
  cross_entropy = float(tf.reduce_sum(losses.per_example_loss(LABELS, LOGITS)))
  # Both replicas saw the same 4 examples: 2 x 4 = the global batch of 8.
  assert float(total) == pytest.approx(cross_entropy / 4 + 2.0, rel=1e-6)


def test_weighted_mean_ignores_padding():
  weights = tf.constant([1.0, 1.0, 0.0, 0.0])
  per_example = losses.per_example_loss(LABELS, LOGITS).numpy()
  assert float(losses.weighted_mean_loss(LABELS, LOGITS, weights)) == (
      pytest.approx(np.mean(per_example[:2]), rel=1e-6))
  assert float(losses.weighted_mean_loss(LABELS, LOGITS, weights * 0)) == 0.0


def test_replica_count_is_the_same_in_and_out_of_a_replica_context():
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  assert losses.num_replicas_in_sync() == 1  # No strategy.
  with strategy.scope():  # Cross-replica context.
    assert losses.num_replicas_in_sync() == 2
    in_replica = strategy.run(
        lambda: tf.constant(losses.num_replicas_in_sync()))
  assert strategy.experimental_local_results(in_replica) == (2, 2)
  # The loss helper too: the same value built in either context.
  with strategy.scope():
    outside = losses.replica_training_loss(LABELS, LOGITS, 8,
                                           [tf.constant(2.0)])
  inside = strategy.run(lambda: losses.replica_training_loss(
      LABELS, LOGITS, 8, [tf.constant(2.0)]))
  for value in strategy.experimental_local_results(inside):
    assert float(value) == pytest.approx(float(outside), rel=1e-6)
