"""The TF2 engines' outer loop, after Orbit's Controller: what happens
between training steps whoever runs them (ctl's `train_steps(n)` calls, or
Keras `fit` through a callback). The non-finite check, summaries and
progress, SIGTERM, a checkpoint every `save_checkpoints_steps` steps,
evaluation of checkpoints at most every `throttle_secs`, and the final
evaluation."""

import concurrent.futures
import logging
import math
import time

from estimator_trainer import best_weights
from estimator_trainer import cadence
from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import early_stopping
from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer import stop_signals
from estimator_trainer import training_progress
from estimator_trainer import watchdog
from estimator_trainer.tf2 import cluster_roles
from estimator_trainer.tf2 import evaluation
from estimator_trainer.tf2 import export
from estimator_trainer.tf2 import job as job_lib
from estimator_trainer.tf2.train_summaries import TrainSummaries

_logger = logging.getLogger(__name__)


class Controller:
  """Drives a training job from `start_step` to `job.max_steps`.

  The engine trains; after each run of steps it calls `after_steps`, and
  `checkpoint` when `checkpoint_due` (ctl) or at the end of a Keras epoch of
  `save_checkpoints_steps` steps; `finish` ends the run. `watched`:
  preemption.watch's (stop, signals).
  """

  def __init__(self, job, start_step, evaluate, watched):
    self.job = job
    self.step = start_step
    self._evaluator = evaluate and _evaluator(job)
    # Exports follow evaluations, as Estimator's exporters do.
    self._exporter = (export.Exporter(
        job.config, self._evaluator.model, job.head, job.example_format,
        job.checkpoint_dir)
                      if evaluate and job.config.export != 'none' else None)
    self._summaries = TrainSummaries(job, start_step)
    self._stop, self._watched = watched
    self._last_eval = None  # monotonic time of the last evaluation.
    # Every worker evaluates collectively, so each decides alike from its
    # own results (reading the chief's eval files could race its writes).
    self._accuracies = (early_stopping.eval_accuracies(
        layout.eval_dir(job.config.model_dir))
                        if job.config.early_stopping_evals else {})
    # --validation_fraction: the rule ranks the validation part instead.
    self._best = self._validator = None
    if self._evaluator and job.config.validation_fraction:
      self._best = best_weights.Best(job.config.model_dir,
                                     job.config.early_stopping_evals,
                                     writes=job.is_chief)
      self._validator = evaluation.Evaluator(job, job.source.validation(),
                                             layout.VALIDATION_EVAL_DIR)
    self.result = None  # The latest evaluation; None when preempted.
    self.metrics = None  # metrics.json's dict, written by finish.
    self._job_finished = False
    self.stopped = False  # Saved on SIGTERM or Ctrl-C: training has ended.
    self._signals = None  # The stop_signals.StopSignals that stopped it.
    self.early_stopped = False  # No better accuracy in the last evaluations.

  @property
  def done(self):
    """Training has ended: no more steps to run."""
    return (self.step >= self.job.max_steps or self.stopped or
            self.early_stopped)

  def steps_to_next_stop(self, steps_per_loop):
    """At most `steps_per_loop`, ending on checkpoint, summary and log steps
    (as the estimator engine's runs do) and at the last step."""
    return cadence.steps_to_next_stop(self.job.config, self.step,
                                      self.job.max_steps, steps_per_loop)

  def after_steps(self, step, loss, read_metrics):
    """After training to `step`, whose last loss is `loss`. Returns True
    when a summary was written (read_metrics() read: reset them)."""
    self.step = step
    if not math.isfinite(loss):  # Before any save of these weights.
      # Named as the estimator engine names it (not Python's 'nan').
      what = 'NaN' if math.isnan(loss) else 'Inf'
      raise faults.diverged(f'loss is {what}', step,
                            self.job.config.model_dir)
    wrote = self._summaries.update(step, loss, read_metrics)
    if not self.stopped:
      self._signals = self._stop(lambda: self.job.save(step))
      self.stopped = self._signals is not None
    return wrote

  def checkpoint_due(self, previous_step):
    every = self.job.config.save_checkpoints_steps
    return not self.stopped and (
        self.step // every > previous_step // every or
        self.step >= self.job.max_steps)

  def checkpoint(self):
    """Saves the current step and evaluates it unless throttled (the last
    step's evaluation is finish's); nothing when preempted (already
    saved)."""
    if self.stopped:
      return
    began = time.monotonic()
    self.job.save(self.step)
    if self._evaluator and self.step < self.job.max_steps and (
        self._last_eval is None or
        time.monotonic() - self._last_eval >= self.job.config.throttle_secs):
      self._evaluate(final=False)
    self._summaries.exclude(time.monotonic() - began)

  def _evaluate(self, final):
    with self.job.averaged():  # Evaluation and export of --ema_decay's.
      self._evaluate_and_export(final)

  def _evaluate_and_export(self, final):
    self.result = self._evaluator.evaluate(self.step)
    self._last_eval = time.monotonic()
    patience = self.job.config.early_stopping_evals
    exported = self.result
    if self._best:  # The final export follows the best step's restore.
      validation = self._validator.evaluate(self.step)
      self.early_stopped |= self._best.after(
          self.job.manager.latest_checkpoint, validation)
      exported = {**self.result, early_stopping.VALIDATION_SCORE:
                  early_stopping.score(validation)}
      final = False
    elif patience:
      self._accuracies[self.step] = early_stopping.score(self.result)
      if early_stopping.no_improvement(self._accuracies, patience):
        self.early_stopped = final = True
    if self._exporter:
      self._exporter.after_evaluation(exported, final)

  def _restore_best(self):
    """The best validation step's weights back in the model (and as
    model_dir's latest checkpoint), evaluated and exported as final."""
    path = self._best.restore()
    # Not the weights of the step just evaluated (every worker's, and the
    # chief's copy of it may still be under way).
    if self._best.kept['step'] != self.step:
      self.job.checkpoint.restore(path).expect_partial()
    self.step = self._best.kept['step']
    with self.job.averaged():
      self.result = self._evaluator.evaluate(self.step)
      if self._exporter:
        self._exporter.after_evaluation(
            {**self.result,
             early_stopping.VALIDATION_SCORE: self._best.kept['score']}, True)

  def finish(self):
    """Ends the run: unless preempted, the final evaluation and export (of
    the last step, unless early stopping's evaluation was it) and
    metrics.json, which SIGTERM or Ctrl-C stops at once, as it stops
    training (stop_signals.finish); then the job's clean-up. Says when stopped
    (raises KeyboardInterrupt after a Ctrl-C: stop_signals.stopped)."""
    self._summaries.close()
    try:
      if self.stopped:
        stop_signals.stopped(self._signals, self.step)
      else:
        _logger.info('Trained to step %d', self.step)
        self.metrics = stop_signals.finish(self.step, self._end, self._watched)
    finally:
      if not self._job_finished:  # Stopped: no result.
        self.result = None
        self.job.finish(trained=False)

  def _end(self):
    if self._evaluator and (self.result is None or
                            self.result['global_step'] < self.step):
      self._evaluate(final=True)
    if self._best:
      self._restore_best()
    self.job.finish(trained=True)
    self._job_finished = True
    return evaluation.write_results(self.job, self.result)


class _SavedCheckpointEvaluator:
  """A parameter-server chief's evaluator: of the checkpoint just saved."""

  def __init__(self, job):
    self._job = job
    self._evaluator = evaluation.CheckpointEvaluator(job.config)
    self.model = self._evaluator.model

  def evaluate(self, step):
    del step  # The latest checkpoint's: training saves before evaluating.
    # In a thread of its own: Keras calls callbacks inside the training
    # strategy's scope, where another strategy's may not nest.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
      return thread.submit(self._evaluator.evaluate,
                           self._job.manager.latest_checkpoint).result()


def _evaluator(job):
  """Evaluates the training model under its strategy; or, with parameter
  servers, the checkpoint just saved, on this process."""
  if job.coordinator:
    return _SavedCheckpointEvaluator(job)
  return evaluation.Evaluator(job)


def _training_job(config):
  """The Job of a training task; None when it starts after its training
  ended (training_progress.training_ended: a cluster's task before its
  strategy, which would wait for the peers, exists)."""
  if config.cluster and training_progress.training_ended(config):
    return None
  job = job_lib.Job(config)
  if not config.cluster and training_progress.training_ended(
      config, job.max_steps):
    job.check_checkpoint()  # Of this model, though nothing is left to do.
    return None
  return job


def engine_modes(run):
  """The modes of a TF2 engine whose `run(job, evaluate)` trains a training
  Job and returns its finished Controller: train_and_evaluate, train, and
  the modes that only restore the model (evaluate, predict, export)."""

  def train_and_evaluate(config):
    """Trains to the configured step count, evaluating checkpoints; returns
    metrics.json's dict. In a cluster the task type decides (an evaluator
    task evaluates in place of the training tasks); None on tasks that
    write no metrics."""
    cluster = config.cluster
    with cluster_lib.tf_config_environment(cluster):
      if cluster and cluster.task_type == cluster_lib.EVALUATOR:
        if not cluster.evaluator_listed:
          # The training tasks decide who evaluates as they start, on every
          # worker alike; unlisted, this task is unknown to them (no
          # announcement can reach them all in time), so they evaluate.
          _logger.warning(
              'This evaluator is in no TF_CONFIG "cluster": the training '
              'tasks of --engine=%s evaluate and export themselves; list '
              'it in every task\'s "cluster" (as TFJob does) to leave that '
              'to it. Nothing to do', config.engine)
          return None
        return cluster_roles.evaluate_until_trained(config)
      if cluster_roles.serves(config):
        return cluster_roles.serve(config)
      with watchdog.peer_lost_fails(config):  # Its weights are broadcast.
        job = _training_job(config)
      if job is None:
        return training_progress.finish_ended(
            config, lambda: evaluation.final_evaluation(config))
      with watchdog.peer_lost_fails(config):
        return run(job, not (cluster and cluster.has_evaluator)).metrics

  def train(config):
    """Trains to the configured step count; returns the final step (None on
    tasks that only serve)."""
    with cluster_lib.tf_config_environment(config.cluster):
      if cluster_roles.serves(config):
        return cluster_roles.serve(config)
      with watchdog.peer_lost_fails(config):
        job = _training_job(config)
      if job is None:
        training_progress.finish_ended(config)
        return checkpoints.latest_step(config.model_dir)
      with watchdog.peer_lost_fails(config):
        return run(job, evaluate=False).step

  return (train_and_evaluate, train, evaluation.evaluate, evaluation.predict,
          export.export)
