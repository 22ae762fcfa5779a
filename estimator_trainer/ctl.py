"""The TF2 custom-training-loop engine: `strategy.run` + `strategy.reduce`.

The same input_fn, model and loss helpers as the estimator engine. One
iterator lives for the whole run (the dataset repeats; training counts
steps, not epochs): destroying a distributed iterator per epoch stalled the
tutorial's loop for seconds on tf.data's autotune thread.
"""

import math
import time

from absl import logging
import tensorflow as tf

from estimator_trainer import faults
from estimator_trainer import losses
from estimator_trainer import tf2
from estimator_trainer.data import TRAIN


class _Trainer:
  """The replica step and the `steps_per_loop` training function."""

  def __init__(self, job):
    self._job = job
    with job.strategy.scope():
      # Means per example over all replicas (SUM-synced totals and counts),
      # not means of the replicas' already-scaled losses.
      self.loss = tf.keras.metrics.Mean()
      self.accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

  def _replica_step(self, images, labels):
    model = self._job.model
    with tf.GradientTape() as tape:
      logits = model(images, training=True)
      loss = losses.replica_training_loss(
          labels, logits, self._job.global_batch_size, model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)
    # Sums the replicas' gradients: right for a loss per global batch.
    self._job.optimizer.apply_gradients(
        zip(gradients, model.trainable_variables))
    self.loss.update_state(losses.per_example_loss(labels, logits))
    self.accuracy.update_state(labels, logits)
    return loss

  def read_metrics(self):
    return float(self.loss.result()), float(self.accuracy.result())

  @tf.function
  def train_steps(self, iterator, num_steps):
    """Runs `num_steps` steps in one call; returns the last step's loss."""
    loss = tf.constant(0.0)
    for _ in tf.range(num_steps):
      features, labels = next(iterator)
      per_replica = self._job.strategy.run(self._replica_step,
                                           (features['image'], labels))
      loss = self._job.strategy.reduce(tf.distribute.ReduceOp.SUM,
                                       per_replica, axis=None)
    return loss


def _train(config, evaluate):
  """Returns the job and the last evaluation (None when preempted)."""
  job = tf2.Job(config)
  step = job.restore()
  trainer = _Trainer(job)
  evaluator = tf2.Evaluator(job) if evaluate else None
  train_summaries = tf2.TrainSummaries(job, step)
  iterator = iter(job.distribute(TRAIN))
  result, last_eval = None, None
  every = config.save_checkpoints_steps
  with faults.Sigterm(enabled=config.cluster is None) as sigterm:
    while step < job.max_steps:
      # Loops end on checkpoint and summary steps, as Estimator's do.
      num_steps = min(config.steps_per_loop, job.max_steps - step,
                      every - step % every, config.save_summary_steps -
                      step % config.save_summary_steps)
      loss = float(trainer.train_steps(iterator, tf.constant(num_steps)))
      # Counted here: reading the optimizer's counter costs an op per loop.
      previous, step = step, step + num_steps
      if not math.isfinite(loss):  # Before any save of these weights.
        raise faults.diverged(f'loss is {loss}', step, config.model_dir)
      if train_summaries.update(step, loss, trainer.read_metrics):
        trainer.loss.reset_state()
        trainer.accuracy.reset_state()
      if sigterm.received:
        job.save(step)
        faults.log_preempted(step)
        break
      if step // every > previous // every or step >= job.max_steps:
        job.save(step)
        final = step >= job.max_steps
        # As train_and_evaluate: each checkpoint, at most every throttle_secs.
        if evaluator and (final or last_eval is None or time.monotonic() -
                          last_eval >= config.throttle_secs):
          result, last_eval = evaluator.evaluate(step), time.monotonic()
  train_summaries.close()
  job.finish()
  if sigterm.received:
    return job, None
  if evaluator and (result is None or result['global_step'] < step):
    result = evaluator.evaluate(step)  # Restarted after the last step.
  logging.info('Trained to step %d', step)
  return job, result


def train_and_evaluate(config):
  """Trains to the configured step count, evaluating at each checkpoint;
  returns metrics.json's dict (None on workers other than the chief)."""
  return tf2.write_results(*_train(config, evaluate=True))


def train(config):
  """Trains to the configured step count; returns the final step."""
  job, _ = _train(config, evaluate=False)
  return job.step


evaluate = tf2.evaluate
