"""The TF2 custom-training-loop engine: `strategy.run` + `strategy.reduce`.

The same input_fn, model and loss helpers as the estimator engine. One
iterator lives for the whole run (the dataset repeats; training counts
steps, not epochs): destroying a distributed iterator per epoch stalled the
tutorial's loop for seconds on tf.data's autotune thread.
"""

import tensorflow as tf

from estimator_trainer.data import ModeKeys
from estimator_trainer.tf2 import controller as controller_lib
from estimator_trainer.tf2 import preemption
from estimator_trainer.tf2 import updates as updates_lib

TRAIN = ModeKeys.TRAIN


class _Trainer:
  """The replica step and the `steps_per_loop` training function."""

  def __init__(self, job):
    self._job = job
    with job.strategy.scope():
      # Means per example over all replicas (SUM-synced totals and counts),
      # not means of the replicas' already-scaled losses.
      self.loss = tf.keras.metrics.Mean()
      self.accuracy = (tf.keras.metrics.Mean() if job.head.has_accuracy
                       else None)
      # The mean over steps of the summed gradient's norm (the same on
      # every replica) before clipping.
      self.gradient_norm = tf.keras.metrics.Mean()
    self._updates = updates_lib.Updates(job)

  def _replica_step(self, batches):
    """One optimizer step on `batches`, --accumulate_steps micro-batches of
    this replica, each of a loss per global batch divided by their count
    (so the step is one on all of them at once)."""
    model, head = self._job.model, self._job.head

    def loss_of(micro_batch):
      features, labels = micro_batch
      keys = self._job.feature_keys
      weights = features.get(keys.weight)
      logits = model(keys.inputs(features), training=True)
      self.loss.update_state(head.per_example_loss(labels, logits),
                             sample_weight=weights)
      if self.accuracy is not None:
        self.accuracy.update_state(head.correct(labels, logits),
                                   sample_weight=weights)
      return head.replica_training_loss(
          labels, logits, self._job.global_batch_size, model.losses,
          weights) / len(batches)

    loss, norm = self._updates.step(batches, loss_of)
    if norm is not None:
      self.gradient_norm.update_state(norm)
    return loss

  def read_metrics(self):
    accuracy = (float(self.accuracy.result()) if self.accuracy is not None
                else None)
    others = ({'gradient_norm': float(self.gradient_norm.result())}
              if self._job.config.clip_global_norm is not None else {})
    return float(self.loss.result()), accuracy, others

  @tf.function
  def train_steps(self, iterator, num_steps):
    """Runs `num_steps` steps in one call; returns the last step's loss."""
    loss = tf.constant(0.0)
    for _ in tf.range(num_steps):
      batches = [next(iterator)
                 for _ in range(self._job.config.accumulate_steps)]
      per_replica = self._job.strategy.run(self._replica_step, (batches,))
      loss = self._job.strategy.reduce(tf.distribute.ReduceOp.SUM,
                                       per_replica, axis=None)
    return loss

  def runner(self, dataset):
    """`run(num_steps)`: trains `num_steps` more steps on `dataset` (from
    job.distribute), returns the last loss."""
    iterator = iter(dataset)
    coordinator = self._job.coordinator
    if coordinator is None:
      return lambda num_steps: float(self.train_steps(
          iterator, tf.constant(num_steps)))
    per_loop = self._job.config.steps_per_loop

    def run(num_steps):
      # Closures of up to steps_per_loop steps, each run by whichever
      # worker is free; after the join the step count is exact.
      remote = None
      for start in range(0, num_steps, per_loop):
        remote = coordinator.schedule(self.train_steps, args=(
            iterator, tf.constant(min(per_loop, num_steps - start))))
      coordinator.join()
      return float(remote.fetch())
    return run

  def reset_metrics(self):
    self.loss.reset_state()
    if self.accuracy is not None:
      self.accuracy.reset_state()
    self.gradient_norm.reset_state()


def _train(job, evaluate):
  """Trains `job` (and evaluates, if `evaluate`); returns the finished
  Controller."""
  trainer = _Trainer(job)
  with preemption.watch(job.strategy) as watched:
    controller = controller_lib.Controller(job, job.restore(), evaluate,
                                           watched)
    run = trainer.runner(job.distribute(TRAIN))
    while not controller.done:
      previous = controller.step
      # With parameter servers: all steps to the next stop, in closures
      # that keep every worker busy.
      num_steps = controller.steps_to_next_stop(
          job.max_steps if job.coordinator else job.config.steps_per_loop)
      loss = run(num_steps)
      # Counted here: reading the optimizer's counter costs an op per loop.
      if controller.after_steps(previous + num_steps, loss,
                                trainer.read_metrics):
        trainer.reset_metrics()
      if controller.checkpoint_due(previous):
        controller.checkpoint()
    controller.finish()
  return controller


(train_and_evaluate, train, evaluate, predict,
 export) = controller_lib.engine_modes(_train)
