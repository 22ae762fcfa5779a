"""The TF2 custom-training-loop engine: `strategy.run` + `strategy.reduce`.

The same input_fn, model and loss helpers as the estimator engine. One
iterator lives for the whole run (the dataset repeats; training counts
steps, not epochs): destroying a distributed iterator per epoch stalled the
tutorial's loop for seconds on tf.data's autotune thread.
"""

import tensorflow as tf

from estimator_trainer.data import ModeKeys
from estimator_trainer.tf2 import controller as controller_lib
from estimator_trainer.tf2 import exact_steps
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
    self._last_loss = 0.0  # Under parameter servers: of the last step run.

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
    """Runs `num_steps` steps in one call; returns the last step's loss
    (under parameter servers: the last applied step's, and the count of
    steps applied)."""
    strategy, claims = self._job.strategy, self._job.claims
    loss, applied = tf.constant(0.0), tf.constant(0, tf.int64)
    for _ in tf.range(num_steps):
      batches = [next(iterator)
                 for _ in range(self._job.config.accumulate_steps)]
      step = lambda batches=batches: strategy.reduce(
          tf.distribute.ReduceOp.SUM,
          strategy.run(self._replica_step, (batches,)), axis=None)
      if claims is None:
        loss = step()
      else:
        # Without a claim (exact_steps.py) the step updates nothing. The
        # claim is outside strategy.run: the updates' merge_calls fail
        # inside a tf.cond within it.
        applies = claims.claim()
        loss = tf.cond(applies, step, lambda loss=loss: loss)
        applied += tf.cast(applies, tf.int64)
    return loss if claims is None else (loss, applied)

  def runner(self, dataset):
    """`run(step, stop)`: trains from `step` to `stop` on `dataset` (from
    job.distribute); returns the step reached and the last loss."""
    iterator = iter(dataset)
    coordinator = self._job.coordinator
    if coordinator is None:  # The steps are exact: no counter to read.
      return lambda step, stop: (stop, float(self.train_steps(
          iterator, tf.constant(stop - step))))
    per_loop = self._job.config.steps_per_loop

    def run(step, stop):
      # Closures of up to steps_per_loop steps, each run by whichever
      # worker is free. A worker that fails mid-closure leaves the count
      # short (its claimed steps lost) or right (a closure run again
      # applies only the numbers left): after the join the optimizer's
      # count says which, and a short one runs the missing steps.
      while step < stop:
        self._job.claims.open(step, stop)
        remotes = [coordinator.schedule(self.train_steps, args=(
            iterator, tf.constant(min(per_loop, stop - start))))
                   for start in range(step, stop, per_loop)]
        coordinator.join()
        for loss, applied in (remote.fetch() for remote in remotes):
          if applied:
            self._last_loss = float(loss)
        step = self._job.step
        if step < stop:
          exact_steps.log_short(step, stop)
      return step, self._last_loss
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
      step, loss = run(previous, previous + num_steps)
      if controller.after_steps(step, loss, trainer.read_metrics):
        trainer.reset_metrics()
      if controller.checkpoint_due(previous):
        controller.checkpoint()
    controller.finish()
  return controller


(train_and_evaluate, train, evaluate, predict,
 export) = controller_lib.engine_modes(_train)
