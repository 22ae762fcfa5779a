"""What a TF2 training job writes between steps: its summaries, step rates
and progress line, as the estimator engine's train_loop does."""

import logging
import time

import tensorflow as tf

from estimator_trainer import cadence
from estimator_trainer import loss_scale
from estimator_trainer import hparams as hparams_lib
from estimator_trainer import progress as progress_lib
from estimator_trainer import summaries
from estimator_trainer.tf2 import job as job_lib

_logger = logging.getLogger(__name__)


class TrainSummaries:
  """Training events and progress, as the estimator engine writes them
  (estimator/train_loop.py): loss, accuracy, learning_rate and
  examples_per_second (global and per replica) every `save_summary_steps`
  and at the last step, global_step/sec and the `loss = ...` debug line
  every `log_step_count_steps`, the whole run's examples per second at the
  last step; on the chief only. Rates leave out the first run of steps
  (tracing) and what the Controller `exclude`s (checkpoints, evaluations,
  exports)."""

  def __init__(self, job, start_step):
    self._job = job
    self._writer = job_lib.writer(job)
    self._step = start_step  # Of the previous update.
    self._timer = cadence.Timer()
    # Examples per optimizer step.
    self._examples = job.global_batch_size * job.config.accumulate_steps
    hparams = job.hparams()
    self._progress = (progress_lib.Progress(job.max_steps, self._examples,
                                            progress_lib.loss_name(hparams))
                      if job.is_chief else None)
    with self._writer.as_default(step=start_step):
      for summary in hparams_lib.hparams_summaries(
          hparams, hparams_lib.compared(job.config, hparams)):
        tf.summary.experimental.write_raw_pb(summary)

  def update(self, step, loss, read_metrics):
    """After training to `step` (`loss`: the latest, for the progress line).

    `read_metrics()` returns the mean loss and accuracy (None for a head
    without classes) per example since the previous summary, and a dict of
    the engine's other training scalars (name -> mean since then); it is
    called only when a summary is due (reading metrics costs a few ops per
    call). Returns True when it wrote a summary
    (so the caller resets its metrics).
    """
    now = time.monotonic()
    before, self._step = self._step, step
    if self._progress:
      self._progress.update(step, loss)
    config = self._job.config
    summary_due = cadence.summary_due(config, before, step,
                                      self._job.max_steps)
    log_due = cadence.log_due(config, before, step)
    timed = self._timer.started
    if not timed:
      self._timer.start(step, now)
    with self._writer.as_default(step=step):
      if summary_due:
        mean_loss, accuracy, others = read_metrics()
        tf.summary.scalar('loss', mean_loss)
        if accuracy is not None:  # A head with classes.
          tf.summary.scalar('accuracy', accuracy)
        for name, value in others.items():
          tf.summary.scalar(name, value)
        tf.summary.scalar('learning_rate',
                          job_lib.current_learning_rate(self._job.optimizer))
        if loss_scale.is_scaled(self._job.optimizer):
          tf.summary.scalar('loss_scale',
                            float(self._job.optimizer.loss_scale))
        if self._job.skipped_steps is not None:
          tf.summary.scalar('skipped_steps',
                            int(self._job.skipped_steps.numpy()))
      if summary_due and timed:
        steps, seconds = self._timer.since('summary', step, now)
        examples = steps * self._examples / seconds
        tf.summary.scalar('examples_per_second', examples)
        tf.summary.scalar('examples_per_second_per_replica',
                          examples / self._job.num_replicas)
      if step >= self._job.max_steps and timed:
        steps, seconds = self._timer.since('start', step, now)
        tf.summary.scalar(summaries.RUN_RATE, steps * self._examples / seconds)
      if log_due and timed:
        steps, seconds = self._timer.since('log', step, now)
        tf.summary.scalar('global_step/sec', steps / seconds)
        # Estimator's LoggingTensorHook line; shown with --verbosity=1.
        _logger.debug('loss = %s, step = %d (%.3f sec)', loss, step, seconds)
    return summary_due

  def exclude(self, seconds):
    """Leaves `seconds` (not training) out of the rates."""
    self._timer.exclude(seconds)

  def close(self):
    self._writer.flush()
    if self._progress:
      self._progress.close()
