"""The Estimator engine's cluster roles beyond training: parameter servers
and the evaluator, and the files through which the training tasks tell
them how long training runs and when it is over."""

import json
import time

from absl import logging
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.estimator import job as job_lib
from estimator_trainer.watchdog import cluster_watchdog


class TrainingProgress:
  """The protocol through model_dir: the chief writes its train spec
  (max_steps) before training, each training task a finished mark after
  it. Atomic writes: a reader sees a whole file or none."""

  def __init__(self, config):
    self._model_dir = config.model_dir
    self._cluster = config.cluster

  def write_train_spec(self, max_steps, global_batch_size):
    outputs.write_atomic(
        layout.train_spec_file(self._model_dir),
        json.dumps({'max_steps': max_steps,
                    'global_batch_size': global_batch_size}) + '\n')

  def read_max_steps(self, watchdog):
    """Waits (bounded by the watchdog) for the chief's train spec."""
    path = layout.train_spec_file(self._model_dir)
    while not tf.io.gfile.exists(path):
      time.sleep(1)
    watchdog.kick()
    return _read_json(path)['max_steps']

  def mark_finished(self, max_steps):
    """Records that this training task is done with these max_steps."""
    outputs.write_atomic(
        layout.finished_file(self._model_dir, self._cluster.task_type,
                             self._cluster.task_index),
        json.dumps({'max_steps': max_steps}) + '\n')

  def _finished(self, task_type, index, max_steps):
    path = layout.finished_file(self._model_dir, task_type, index)
    return (tf.io.gfile.exists(path) and
            _read_json(path)['max_steps'] == max_steps)

  def num_finished(self, max_steps):
    """How many training tasks finished training to `max_steps`."""
    return sum(self._finished(task_type, index, max_steps)
               for task_type in (cluster_lib.CHIEF, cluster_lib.WORKER)
               for index in range(len(self._cluster.jobs.get(task_type,
                                                             []))))

  def chief_finished(self, max_steps):
    chief = (cluster_lib.CHIEF if cluster_lib.CHIEF in self._cluster.jobs
             else cluster_lib.WORKER)
    return self._finished(chief, 0, max_steps)


def _read_json(path):
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def serve_parameters(config):
  """A ps task: serves variables until every training task has finished.

  Exiting at the final checkpoint is too early: the other workers still
  need the ps to see that training is over (tensorflow#21305).
  """
  cluster = config.cluster
  tf.distribute.Server(tf.train.ClusterSpec(cluster.jobs),
                       job_name=cluster_lib.PS,
                       task_index=cluster.task_index, start=True)
  watchdog = cluster_watchdog(config.cluster_timeout_secs, 'new checkpoint')
  training = TrainingProgress(config)
  max_steps = training.read_max_steps(watchdog)
  progress = None
  while progress is None or progress[1] < cluster.num_trainers:
    time.sleep(1)
    new_progress = (checkpoints.latest_step(config.model_dir),
                    training.num_finished(max_steps))
    if new_progress != progress:
      progress = new_progress
      watchdog.kick()
  watchdog.stop()
  logging.info('Training finished at step %d: parameter server exits',
               progress[0])


def evaluate_until_trained(config):
  """The evaluator task: evaluates each new checkpoint until the last one.

  The last one is at max_steps, or whatever the chief saved when it
  finished earlier (early stopping).
  """
  watchdog = cluster_watchdog(config.cluster_timeout_secs, 'new checkpoint')
  training = TrainingProgress(config)
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
