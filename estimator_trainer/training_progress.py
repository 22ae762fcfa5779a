"""How long a cluster's training runs, and when it is over, told through
model_dir to the tasks that do not train (parameter servers, servers, the
evaluator) by every engine."""

import json
import logging
import time

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import errors
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.watchdog import cluster_watchdog

_logger = logging.getLogger(__name__)


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


def serve(config, finished):
  """This task's tf.distribute.Server, until `finished(training_progress,
  max_steps)`; fails (the watchdog) when neither checkpoints nor finished
  marks move for --cluster_timeout_secs."""
  cluster = config.cluster
  tf.distribute.Server(tf.train.ClusterSpec(cluster.jobs),
                       job_name=cluster.task_type,
                       task_index=cluster.task_index, start=True)
  training = TrainingProgress(config)
  with cluster_watchdog(config.cluster_timeout_secs,
                        'new checkpoint') as watchdog:
    max_steps = training.read_max_steps(watchdog)
    progress = None
    while not finished(training, max_steps):
      time.sleep(1)
      new_progress = (checkpoints.latest_step(config.model_dir),
                      training.num_finished(max_steps))
      if new_progress != progress:
        progress = new_progress
        watchdog.kick()
  _logger.info('Training finished at step %d: %s:%d exits',
               checkpoints.latest_step(config.model_dir), cluster.task_type,
               cluster.task_index)


def follow_checkpoints(config, start):
  """The evaluator task's loop, for any engine: evaluates each new
  checkpoint until one at max_steps, or, when training stopped earlier
  (early stopping), its last one; returns that final evaluation.

  `start()`, called once the chief has told how long training runs (the
  engine's evaluation job is built then, not while waiting), returns the
  engine's (evaluate_and_export(path, max_steps): the result, or None when
  training deleted the checkpoint first; evaluate(path);
  export_final(path, result)). Bounded by the watchdog.
  """
  with cluster_watchdog(config.cluster_timeout_secs,
                        'new checkpoint') as watchdog:
    training = TrainingProgress(config)
    max_steps = training.read_max_steps(watchdog)
    evaluate_and_export, evaluate, export_final = start()
    result, final = None, False
    for path in tf.train.checkpoints_iterator(
        config.model_dir, min_interval_secs=1, timeout=5,
        timeout_fn=lambda: training.chief_finished(max_steps)):
      watchdog.kick()
      evaluated = evaluate_and_export(path, max_steps)
      watchdog.kick()
      if evaluated is not None:
        result = evaluated
        final = result['global_step'] >= max_steps
        if final:
          break
    if not final:  # Training stopped early: its last checkpoint is final.
      path = tf.train.latest_checkpoint(config.model_dir)
      if path is None:  # Never evaluate (or export) untrained weights.
        raise errors.TrainerError(
            f'training ended without a checkpoint in {config.model_dir}')
      if result is None or result['global_step'] < layout.checkpoint_step(path):
        result = evaluate(path)
      export_final(path, result)
  return result
