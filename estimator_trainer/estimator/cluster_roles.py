"""The Estimator engine's cluster roles beyond training: parameter servers
and the evaluator."""

import contextlib
import logging
import os

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import lease
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
  """While the evaluator runs, model_dir says so (layout.evaluator_file, a
  lease): a chief whose TF_CONFIG does not list the evaluator (TensorFlow's
  own train_and_evaluate documentation gives only the evaluator its task)
  learns of it there, and leaves the final evaluation and export to it."""
  path = layout.evaluator_file(model_dir)
  record = lease.new_record()
  outputs.write_atomic(path, lease.dumps(record))
  with lease.hold(path, record):
    yield


def evaluator_announced(model_dir):
  """Whether an evaluator task runs on model_dir (_announced); one whose
  lease is stale (killed) is gone, said in a line."""
  return lease.live(layout.evaluator_file(model_dir),
                    'an evaluator task') is not None


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


def _deleted(checkpoint):
  return not tf.io.gfile.exists(f'{checkpoint}.index')


# Where the evaluator keeps its own copy of the checkpoint it evaluates and
# exports (in model_dir: a hard link where the file system allows).
_PINNED_DIR = '.evaluator-checkpoint'


@contextlib.contextmanager
def _pinned(checkpoint):
  """A copy of `checkpoint`'s files that training's rotation cannot delete
  (None if it already did): its prefix, removed on exit."""
  directory = os.path.join(os.path.dirname(checkpoint), _PINNED_DIR)
  if tf.io.gfile.exists(directory):  # Left by a killed evaluator.
    tf.io.gfile.rmtree(directory)
  tf.io.gfile.makedirs(directory)
  try:
    try:
      for path in tf.io.gfile.glob(f'{checkpoint}.*'):
        target = os.path.join(directory, os.path.basename(path))
        try:
          os.link(path, target)
        except OSError:  # Another file system (gs://...): a copy.
          tf.io.gfile.copy(path, target)
    except tf.errors.NotFoundError:
      if not _deleted(checkpoint):
        raise
    pinned = os.path.join(directory, os.path.basename(checkpoint))
    yield pinned if tf.io.gfile.exists(f'{pinned}.index') else None
  finally:
    tf.io.gfile.rmtree(directory)


def evaluate_and_export(job, exporters, checkpoint, is_final):
  """Evaluates and exports a checkpoint of the running training (as the
  final one when `is_final(evaluation)`); returns the evaluation, or None
  when training deleted the checkpoint first.

  Training keeps its latest --keep_checkpoint_max checkpoints: while the
  evaluator builds its graphs, evaluates and exports, a fast trainer may
  delete the one it started on. The evaluator therefore works on its own
  copy of the checkpoint's files, taken first: the export is of the
  evaluated checkpoint even when training has deleted it meanwhile (the
  final export of an early stop was lost so, 2 runs in 3 on a loaded
  machine). A checkpoint gone before the copy is skipped for the newest.
  """
  with _pinned(checkpoint) as pinned:
    if pinned is None:
      _logger.warning('%s was deleted (--keep_checkpoint_max=%d) before its '
                      'evaluation: evaluating a newer one', checkpoint,
                      job.config.keep_checkpoint_max)
      return None
    result = job.estimator.evaluate(job.input_fn, steps=None,
                                    checkpoint_path=pinned)
    job_lib.export(job, exporters, pinned, result, is_final(result))
  return result


def remove_scratch_dir(config):
  """Deletes a non-chief worker's scratch dir, where TensorFlow points its
  collective saves (TensorBoard would show it as a run)."""
  scratch = config.cluster.scratch_dir(config.model_dir)
  if not config.cluster.is_chief and tf.io.gfile.exists(scratch):
    tf.io.gfile.rmtree(scratch)
