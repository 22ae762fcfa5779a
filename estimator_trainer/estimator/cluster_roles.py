"""The Estimator engine's cluster roles beyond training: parameter servers
and the evaluator."""

from absl import logging
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import training_progress
from estimator_trainer.estimator import job as job_lib
from estimator_trainer.watchdog import cluster_watchdog


def serve_parameters(config):
  """A ps task: serves variables until every training task has finished.

  Exiting at the final checkpoint is too early: the other workers still
  need the ps to see that training is over (tensorflow#21305).
  """
  training_progress.serve(
      config, lambda training, max_steps: training.num_finished(max_steps) ==
      config.cluster.num_trainers)


def evaluate_until_trained(config):
  """The evaluator task: evaluates each new checkpoint until the last one.

  The last one is at max_steps, or whatever the chief saved when it
  finished earlier (early stopping).
  """
  watchdog = cluster_watchdog(config.cluster_timeout_secs, 'new checkpoint')
  training = training_progress.TrainingProgress(config)
  max_steps = training.read_max_steps(watchdog)
  job = job_lib.eval_job(config)
  exporters = job_lib.exporters(job)  # Once: BestExporter keeps the best.

  result, final = None, False
  for checkpoint in tf.train.checkpoints_iterator(
      config.model_dir, min_interval_secs=1, timeout=5,
      timeout_fn=lambda: training.chief_finished(max_steps)):
    watchdog.kick()
    evaluated = evaluate_and_export(job, exporters, checkpoint, max_steps)
    watchdog.kick()
    if evaluated is not None:
      result = evaluated
      final = result['global_step'] >= max_steps
      if final:
        break
  if not final:  # Training stopped early: its last checkpoint is final.
    checkpoint = tf.train.latest_checkpoint(config.model_dir)
    if result is None or result['global_step'] < checkpoints.latest_step(
        config.model_dir):
      result = job.estimator.evaluate(job.input_fn, steps=None,
                                      checkpoint_path=checkpoint)
    job_lib.export(job, exporters, checkpoint, result, True)
  watchdog.stop()
  return job.write_metrics(result)


def evaluate_and_export(job, exporters, checkpoint, max_steps):
  """Evaluates and exports a checkpoint of the running training; returns
  the evaluation, or None when training deleted the checkpoint first.

  Training keeps its latest --keep_checkpoint_max checkpoints: while the
  evaluator builds its graph and evaluates, a fast trainer may delete the
  one it started on. The evaluator then goes on to the newest.
  """
  try:
    result = job.estimator.evaluate(job.input_fn, steps=None,
                                    checkpoint_path=checkpoint)
    job_lib.export(job, exporters, checkpoint, result,
                   result['global_step'] >= max_steps)
    return result
  # Saver.restore: ValueError when the files are gone, NotFoundError when
  # they go while it reads them.
  except (ValueError, tf.errors.NotFoundError):
    if tf.io.gfile.exists(f'{checkpoint}.index'):
      raise
    logging.warning('%s was deleted (--keep_checkpoint_max=%d) before its '
                    'evaluation ended: evaluating a newer one', checkpoint,
                    job.config.keep_checkpoint_max)
    return None


def remove_scratch_dir(config):
  """Deletes a non-chief worker's scratch dir, where TensorFlow points its
  collective saves (TensorBoard would show it as a run)."""
  scratch = config.cluster.scratch_dir(config.model_dir)
  if not config.cluster.is_chief and tf.io.gfile.exists(scratch):
    tf.io.gfile.rmtree(scratch)
