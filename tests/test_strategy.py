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
