"""Strategies from the config (strategy.py)."""

import numpy as np
import tensorflow as tf

from estimator_trainer.strategy import make_strategy


def test_mirrored_strategies_one_after_another_all_reduce_any_shape():
  """A pipeline training two models in one process: the second strategy's
  first all-reduce is of another shape than the first's (it failed with
  'Shape mismatch in the collective instance 100')."""
  for size in (3, 5):
    strategy = make_strategy('mirrored', cpu_replicas=2)

    @tf.function
    def all_reduce(size=size):
      return tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, tf.ones([size]))

    result = strategy.experimental_local_results(strategy.run(all_reduce))
    for replica in result:
      np.testing.assert_array_equal(replica.numpy(), np.full([size], 2.0))


def test_parameter_servers_split_large_tables_only():
  """A shard per ps for a million-row table; no variable of the built-in
  image models is split (their runs stay as they were)."""
  from estimator_trainer import models  # pylint: disable=g-import-not-at-top
  from estimator_trainer import partitioning  # pylint: disable=g-import-not-at-top
  partitioner = partitioning.tf2_partitioner(2)
  assert partitioner(tf.TensorShape([1_000_000, 4]), tf.float32) == [2, 1]
  assert partitioning.tf2_partitioner(3)(
      tf.TensorShape([1_000_000, 4]), tf.float32) == [3, 1]
  for name, shape in (('cnn', (28, 28, 1)), ('resnet20', (32, 32, 3))):
    for weight in models.build(name, shape, 10).weights:
      assert partitioner(weight.shape, weight.dtype)[0] == 1, (name,
                                                               weight.name)
