"""The Estimator engine's run modes: train_and_evaluate (every cluster
role), train, evaluate, predict, export."""

import contextlib
import logging

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import export as export_lib
from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer import stop_signals
from estimator_trainer import training_progress
from estimator_trainer.estimator import cluster_roles
from estimator_trainer.estimator import job as job_lib
from estimator_trainer.watchdog import WatchdogHook, cluster_watchdog
from estimator_trainer.watchdog import peer_lost_hooks

_logger = logging.getLogger(__name__)


def train_and_evaluate(config):
  """Trains, evaluates on the whole test set; returns metrics.json's dict.

  In a TF_CONFIG cluster the task type decides: chief and workers train, ps
  tasks serve variables until training ends, the evaluator evaluates every
  new checkpoint and writes metrics.json (the chief does, at the end, when
  there is no evaluator). Returns None on tasks that write no metrics.
  """
  with cluster_lib.tf_config_environment(config.cluster):
    if config.cluster is None:
      return _train_and_evaluate_alone(config)
    _logger.info('Cluster task %s:%d of %s', config.cluster.task_type,
                 config.cluster.task_index, config.cluster.jobs)
    if config.cluster.task_type == cluster_lib.PS:
      return cluster_roles.serve_parameters(config)
    if config.cluster.task_type == cluster_lib.EVALUATOR:
      return cluster_roles.evaluate_until_trained(config)
    if training_progress.training_ended(config):  # Restarted after the end.
      return training_progress.finish_ended(
          config, lambda: job_lib.final_evaluation(job_lib.eval_job(config)))
    return _train_in_cluster(config)


def _train_and_evaluate_alone(config):
  """One process: stops on SIGTERM (faults.py); None when preempted."""
  job = job_lib.Job(config)
  if training_progress.training_ended(config, job.max_steps):  # A rerun.
    return training_progress.finish_ended(config,
                                          lambda: job_lib.final_evaluation(job))
  with checkpoints.none_untrained(config.model_dir):
    return faults.train_and_evaluate(
        job.estimator, *job.specs([], alone=True),
        then=lambda result: job.write_metrics(
            job_lib.final_evaluation(job) if job.validator else result[0]))


def _train_in_cluster(config):
  """A chief or worker: trains with its peers (a SIGTERM stops the task at
  once: the tasks would have to stop together); the chief evaluates at the
  end when the cluster has no evaluator."""
  # Before the strategy exists: creating it may already wait for peers.
  with cluster_watchdog(config.cluster_timeout_secs,
                        'training step') as watchdog:
    job = job_lib.Job(config)
    if config.strategy == 'multi_worker_mirrored':  # Its strategy exists.
      stop_signals.sigterm_ends_at_once()
    progress = training_progress.TrainingProgress(config)
    if config.cluster.is_chief:
      progress.write_train_spec(job.max_steps, job.global_batch_size)
    # The chief's step 0 too, which only it writes into model_dir.
    with (checkpoints.none_untrained(config.model_dir)
          if config.cluster.is_chief else contextlib.nullcontext()):
      tf.estimator.train_and_evaluate(job.estimator, *job.specs(
          [WatchdogHook(watchdog), *peer_lost_hooks(config)]))
  cluster_roles.remove_scratch_dir(config)
  if config.cluster.is_chief:
    training_progress.log_final_step(
        checkpoints.latest_step(config.model_dir), job.max_steps)
  # Before the finished mark, after which a running evaluator ends.
  evaluator = config.cluster.has_evaluator or (
      cluster_roles.evaluator_announced(config.model_dir))
  progress.mark_finished(job.max_steps)
  if config.cluster.is_chief and not evaluator:
    job = job_lib.eval_job(config)
    # A SIGTERM ends the task, as during training (stop_signals.finish).
    return stop_signals.finish(checkpoints.latest_step(config.model_dir),
                         lambda: job.write_metrics(
                             job_lib.final_evaluation(job)), sigterm=False)
  if config.cluster.is_chief and not config.cluster.has_evaluator:
    _logger.info('An evaluator task runs (%s), though TF_CONFIG lists none: '
                 'it writes the final evaluation and export',
                 layout.evaluator_file(config.model_dir))
  return None


def train(config):
  """Trains to the configured step count; returns the latest checkpoint's
  global step. (Clusters train through train_and_evaluate: config_checks.py.)"""
  job = job_lib.Job(config)
  if training_progress.training_ended(config, job.max_steps):  # A rerun.
    training_progress.finish_ended(config)
  else:
    with checkpoints.none_untrained(config.model_dir):
      faults.train(job.estimator, job.input_fn, job.max_steps,
                   job.train_hooks(), job.saving_listeners())
  return checkpoints.latest_step(config.model_dir)


def evaluate(config):
  """Evaluates the latest checkpoint on the whole test set."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.eval_job(config)
  return job.write_metrics(job.estimator.evaluate(job.input_fn, steps=None))


def predict(config):
  """Writes predictions of the first `num_predictions` test examples (the
  input_fn's: of --predict_files, every record)."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.eval_job(config)
  path = config.resolved_predictions_file
  count = outputs.write_predictions(path, job.estimator.predict(job.input_fn))
  _logger.info('Wrote %d predictions to %s', count, path)
  return path


def export(config):
  """Writes a SavedModel of the latest checkpoint; returns its directory."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.eval_job(config)
  return export_lib.export_latest_checkpoint(job.estimator, config.model_dir,
                                             job.example_format)
