"""The Estimator engine's cluster roles beyond training: parameter servers
and the evaluator."""

import contextlib
import json
import logging
import os
import socket

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer import training_progress
from estimator_trainer.estimator import job as job_lib

_logger = logging.getLogger(__name__)


def serve_parameters(config):
  """A ps task: serves variables until every training task has finished.

  Exiting at the final checkpoint is too early: the other workers still
  need the ps to see that training is over (tensorflow#21305).
  """
  training_progress.serve(
      config, lambda training, max_steps: training.num_finished(max_steps) ==
      config.cluster.num_trainers)


def evaluate_until_trained(config):
  """The evaluator task: evaluates (and exports) each new checkpoint until
  the last one (training_progress.follow_checkpoints); writes metrics.json
  of the last. Restarted after the end, what is left
  (training_progress.finish_ended)."""
  with _announced(config.model_dir):
    return _evaluate_until_trained(config)


@contextlib.contextmanager
def _announced(model_dir):
  """While the evaluator runs, model_dir says so (layout.evaluator_file):
  a chief whose TF_CONFIG does not list the evaluator (TensorFlow's own
  train_and_evaluate documentation gives only the evaluator its task)
  learns of it there, and leaves the final evaluation and export to it."""
  path = layout.evaluator_file(model_dir)
  tf.io.gfile.makedirs(model_dir)
  outputs.write_atomic(path, json.dumps(
      {'host': socket.gethostname(), 'pid': os.getpid()}) + '\n')
  try:
    yield
  finally:
    tf.io.gfile.remove(path)


def evaluator_announced(model_dir):
  """Whether an evaluator task runs on model_dir (_announced)."""
  return tf.io.gfile.exists(layout.evaluator_file(model_dir))


def _evaluate_until_trained(config):
  if training_progress.training_ended(config):
    return training_progress.finish_ended(
        config, lambda: job_lib.final_evaluation(job_lib.eval_job(config)))

  def start():
    job = job_lib.eval_job(config)
    # Once: the best export so far is read back then, and kept up to date.
    exporters = job_lib.exporters(job)
    return (lambda path, is_final: evaluate_and_export(
        job, exporters, path, is_final),
            lambda path: job.estimator.evaluate(job.input_fn, steps=None,
                                                checkpoint_path=path),
            lambda path, result: job_lib.export(job, exporters, path, result,
                                                True))

  return outputs.write_eval_metrics(
      config.model_dir, training_progress.follow_checkpoints(config, start))


# Saver.restore's errors when a checkpoint's files are gone (ValueError),
# or go while it reads them (NotFoundError).
_RESTORE_ERRORS = (ValueError, tf.errors.NotFoundError)


def _deleted(checkpoint):
  return not tf.io.gfile.exists(f'{checkpoint}.index')


def evaluate_and_export(job, exporters, checkpoint, is_final):
  """Evaluates and exports a checkpoint of the running training (as the
  final one when `is_final(evaluation)`); returns the evaluation, or None
  when training deleted the checkpoint first.

  Training keeps its latest --keep_checkpoint_max checkpoints: while the
  evaluator builds its graphs, evaluates and exports, a fast trainer may
  delete the one it started on. The evaluator then goes on to the newest;
  an export that failed so counts for nothing (export_policy).
  """
  try:
    result = job.estimator.evaluate(job.input_fn, steps=None,
                                    checkpoint_path=checkpoint)
  except _RESTORE_ERRORS:
    if not _deleted(checkpoint):
      raise
    _logger.warning('%s was deleted (--keep_checkpoint_max=%d) before its '
                    'evaluation ended: evaluating a newer one', checkpoint,
                    job.config.keep_checkpoint_max)
    return None
  try:
    job_lib.export(job, exporters, checkpoint, result, is_final(result))
  except _RESTORE_ERRORS:
    if not _deleted(checkpoint):
      raise
    _logger.warning('%s was deleted (--keep_checkpoint_max=%d) after its '
                    'evaluation, before its export: not exported',
                    checkpoint, job.config.keep_checkpoint_max)
  return result


def remove_scratch_dir(config):
  """Deletes a non-chief worker's scratch dir, where TensorFlow points its
  collective saves (TensorBoard would show it as a run)."""
  scratch = config.cluster.scratch_dir(config.model_dir)
  if not config.cluster.is_chief and tf.io.gfile.exists(scratch):
    tf.io.gfile.rmtree(scratch)
