"""Exact step counts under parameter servers: each step claims a number on
the ps before it updates anything, and only the numbers below the stop apply.

A ClusterCoordinator runs a closure again on another worker when its worker
fails mid-closure (TensorFlow documents that a scheduled function may run
more than once); the steps the failed worker had applied stay on the ps, so
without claims they were applied twice (issue 73: a Keras run to 3,000 steps
ended at 3,033). With claims, the second run's extra steps find no number
left and skip their updates (their batches are read all the same). A worker
killed between its claim and its update leaves the count short: the chief
sees it after the join (the optimizer's iterations below the stop) and runs
the missing steps again.

The claim is made once a step in the scheduled function (cross-replica
context), before its strategy.run, whatever a worker's replicas.
"""

import logging

import tensorflow as tf

_logger = logging.getLogger(__name__)

# ResourceCountUpTo needs a limit; the stop is the real one.
_NO_LIMIT = 2**62


class Claims:
  """The next step number to claim and the stop, variables on the ps
  (not checkpointed: the chief sets both before each round of closures)."""

  def __init__(self, strategy):
    with strategy.scope():
      self._next = tf.Variable(0, dtype=tf.int64, trainable=False,
                               name='next_step_claim')
      self._stop = tf.Variable(0, dtype=tf.int64, trainable=False,
                               name='step_claims_stop')

  def open(self, step, stop):
    """Lets the steps from `step` (the optimizer's iterations) to `stop`
    apply; on the chief, while no closure is in flight."""
    self._next.assign(step)
    self._stop.assign(stop)

  def claim(self):
    """In a step, before its updates: True when it may apply them. The
    kernel increments under the variable's lock and returns the value
    before, so no two steps get one number."""
    number = tf.raw_ops.ResourceCountUpTo(
        resource=self._next.handle, limit=_NO_LIMIT, T=tf.int64)
    return number < self._stop.read_value()


def log_short(step, stop):
  """After a round of closures that reached `step` of `stop`."""
  _logger.info('Step %d after a round of closures to %d: a worker failed '
               'after claiming %d step(s); running them again', step, stop,
               stop - step)
