"""The Keras engine: the same model compiled and fitted under
`strategy.scope()`, with the same data, evaluation and model_dir layout as the
other engines.

A fit "epoch" is `save_checkpoints_steps` steps of the repeated training
dataset: the checkpoint and evaluation cadence, as under Estimator.
`BackupAndRestore` makes an interrupted fit resume where it stopped.
"""

import math
import time

from absl import logging
import tensorflow as tf

from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer import tf2
from estimator_trainer.data import TRAIN


class _ModelDir(tf.keras.callbacks.Callback):
  """Writes what the estimator engine writes: training summaries and
  progress, a checkpoint and an evaluation every `save_checkpoints_steps`;
  stops at the configured step count."""

  def __init__(self, job, evaluator, start_step, sigterm):
    super().__init__()
    self._job = job
    self._evaluator = evaluator
    self._summaries = tf2.TrainSummaries(job, start_step)
    self._sigterm = sigterm
    self._last_eval = None
    self.result = None

  def on_train_batch_end(self, batch, logs=None):
    step = self._job.step
    loss = float(logs['loss'])  # Keras's: the mean since the epoch began.
    if not math.isfinite(loss):  # Raised before any save of these weights.
      raise faults.diverged(f'loss is {loss}', step,
                            self._job.config.model_dir)
    self._summaries.update(step, loss,
                           lambda: (loss, float(logs['accuracy'])))
    if step >= self._job.max_steps or self._sigterm.received:
      self.model.stop_training = True

  def on_epoch_end(self, epoch, logs=None):
    step = self._job.step
    self._job.save(step)
    if self._sigterm.received:
      faults.log_preempted(step)
      return
    final = step >= self._job.max_steps
    if self._evaluator and (
        final or self._last_eval is None or
        time.monotonic() - self._last_eval >= self._job.config.throttle_secs):
      self.result = self._evaluator.evaluate(step)
      self._last_eval = time.monotonic()

  def on_train_end(self, logs=None):
    self._summaries.close()


def _fit(config, evaluate):
  job = tf2.Job(config)
  step = job.restore()
  with job.strategy.scope():
    job.model.compile(
        optimizer=job.optimizer,
        # Keras scales it per global batch itself, like our loss helper.
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=['accuracy'], steps_per_execution=config.steps_per_loop)
  evaluator = tf2.Evaluator(job) if evaluate else None
  every = config.save_checkpoints_steps
  backup = layout.backup_dir(job.checkpoint_dir)
  with faults.Sigterm(enabled=config.cluster is None) as sigterm:
    model_dir_callback = _ModelDir(job, evaluator, step, sigterm)
    if step < job.max_steps:
      data = tf.keras.utils.experimental.DatasetCreator(
          lambda context: job.input_fn(TRAIN, context).map(
              lambda features, labels: (features['image'], labels)),
          job.input_options())
      job.model.fit(
          data, epochs=math.ceil(job.max_steps / every),
          initial_epoch=step // every, steps_per_epoch=every, verbose=0,
          callbacks=[tf.keras.callbacks.BackupAndRestore(backup),
                     model_dir_callback])
  if tf.io.gfile.exists(backup) and not tf.io.gfile.listdir(backup):
    tf.io.gfile.rmtree(backup)  # Emptied by BackupAndRestore after fit.
  if sigterm.received:
    job.finish()
    return job, None
  result = model_dir_callback.result
  if evaluator and (result is None or result['global_step'] < job.step):
    result = evaluator.evaluate(job.step)  # Restarted after the last step.
  job.finish()
  logging.info('Trained to step %d', job.step)
  return job, result


def train_and_evaluate(config):
  """Fits to the configured step count, evaluating at each checkpoint;
  returns metrics.json's dict (None on workers other than the chief)."""
  return tf2.write_results(*_fit(config, evaluate=True))


def train(config):
  """Fits to the configured step count; returns the final step."""
  job, _ = _fit(config, evaluate=False)
  return job.step


evaluate = tf2.evaluate
