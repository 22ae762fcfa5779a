"""How long a cluster's training runs, and when it is over, told through
model_dir to the tasks that do not train (parameter servers, servers, the
evaluator) by every engine; and what a training task started after the end
(a rerun, a restart by a supervisor) has left to do."""

import json
import logging
import time

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import early_stopping
from estimator_trainer import errors
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer import stop_signals
from estimator_trainer.watchdog import cluster_watchdog

_logger = logging.getLogger(__name__)


# The flags that decide how many steps training runs (with the data, for
# --train_epochs). A task restarted after the end trusts the chief's finished
# mark only for the same ones: a rerun with more --train_steps trains on.
_LENGTH_FLAGS = ('train_steps', 'train_epochs', 'batch_size_per_replica',
                 'global_batch_size', 'dataset', 'train_split', 'train_files',
                 'idx_dir', 'data_dir')


def _length_flags(config):
  flags = {name: getattr(config, name) for name in _LENGTH_FLAGS}
  # Only when set: the train specs of versions before it still match.
  if config.accumulate_steps != 1:
    flags['accumulate_steps'] = config.accumulate_steps
  return flags


class TrainingProgress:
  """The protocol through model_dir: the chief writes its train spec
  (max_steps, and the flags that gave it) before training, each training
  task a finished mark after it. Atomic writes: a reader sees a whole file
  or none."""

  def __init__(self, config):
    self._config = config
    self._model_dir = config.model_dir
    self._cluster = config.cluster

  def write_train_spec(self, max_steps, global_batch_size):
    outputs.write_atomic(
        layout.train_spec_file(self._model_dir),
        json.dumps({'max_steps': max_steps,
                    'global_batch_size': global_batch_size,
                    'length_flags': _length_flags(self._config)}) + '\n')

  def ended(self):
    """The max_steps of this task's flags when training with them is over
    (else None): the chief has finished it, or model_dir's latest checkpoint
    is at max_steps (a chief killed between that save and its finished
    mark; its restart waited for peers that had exited). Its peers may be
    gone, and it must not wait for them."""
    path = layout.train_spec_file(self._model_dir)
    if not tf.io.gfile.exists(path):
      return None
    spec = _read_json(path)
    max_steps = spec['max_steps']
    if spec.get('length_flags') != _length_flags(self._config):
      return None
    if (self.chief_finished(max_steps) or
        checkpoints.latest_step(self._model_dir) >= max_steps):
      return max_steps
    return None

  def read_max_steps(self, watchdog):
    """Waits (bounded by the watchdog) for the chief's train spec of this
    run: of this task's length flags. A rerun with more --train_steps finds
    the last run's spec (and its finished marks) until its chief writes its
    own; serving by that one, a parameter server left at once and the new
    run's chief failed."""
    path = layout.train_spec_file(self._model_dir)
    while True:
      if tf.io.gfile.exists(path):
        spec = _read_json(path)
        if spec.get('length_flags') == _length_flags(self._config):
          break
      time.sleep(1)
    watchdog.kick()
    return spec['max_steps']

  def mark_finished(self, max_steps):
    """Records that this training task is done with these max_steps."""
    outputs.write_atomic(
        layout.finished_file(self._model_dir, self._cluster.task_type,
                             self._cluster.task_index),
        json.dumps({'max_steps': max_steps}) + '\n')

  def mark_ended(self):
    """The finished mark of a training task restarted after the end
    (ended()), unless written: its former incarnation may have been killed
    before writing it, and the parameter servers and the evaluator wait for
    it."""
    max_steps = self.ended()
    if not self._finished(self._cluster.task_type, self._cluster.task_index,
                          max_steps):
      self.mark_finished(max_steps)

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


def training_ended(config, max_steps=None):
  """Whether this training task starts after its training ended: in a
  cluster, the chief finished it (training_progress marks; asked before the
  strategy exists, which would wait for the peers); alone, model_dir's
  latest checkpoint is at `max_steps`."""
  if config.cluster:
    return TrainingProgress(config).ended() is not None
  return checkpoints.latest_step(config.model_dir) >= max_steps


def _results_of(model_dir, step):
  """metrics.json's dict when it holds the evaluation of `step`; else None."""
  path = layout.metrics_file(model_dir)
  if not tf.io.gfile.exists(path):
    return None
  metrics = _read_json(path)
  return metrics if metrics.get('global_step') == step else None


def finish_ended(config, final_evaluation=None):
  """What a training task started after the end (training_ended) has left
  to do, said in one line: the final evaluation, export and metrics.json,
  unless metrics.json holds that of the last checkpoint already, on the
  task that writes them (alone, a cluster's evaluator task, or its chief
  when it has none); nothing elsewhere, or without `final_evaluation`
  (--mode=train).

  `final_evaluation()` evaluates and exports model_dir's latest checkpoint,
  returning the evaluation. Returns metrics.json's dict, or None when this
  task writes no metrics. A Ctrl-C stops them at once, as a SIGTERM does
  alone (stop_signals.finish); in a cluster a SIGTERM ends the task, whose
  supervisor restarts it, as during training.
  """
  model_dir, cluster = config.model_dir, config.cluster
  step = checkpoints.latest_step(model_dir)
  if cluster and cluster.task_type in (cluster_lib.CHIEF, cluster_lib.WORKER):
    TrainingProgress(config).mark_ended()
  writes_results = cluster is None or (
      cluster.task_type == cluster_lib.EVALUATOR if cluster.has_evaluator
      else cluster.is_chief)
  if final_evaluation is None or not writes_results:
    task = f' for {cluster.task_type}:{cluster.task_index}' if cluster else ''
    _logger.info('Training already finished at step %d: nothing left to '
                 'do%s', step, task)
    return None
  results = _results_of(model_dir, step)
  if results is not None:
    _logger.info('Training already finished at step %d and %s holds its '
                 'final evaluation: nothing left to do (--mode=evaluate or '
                 '--mode=export evaluate or export it again)', step,
                 layout.metrics_file(model_dir))
    return results
  _logger.info('Training already finished at step %d: %s left', step,
               'its final evaluation is' if config.export == 'none' else
               'its final evaluation and export are')
  return stop_signals.finish(step, lambda: outputs.write_eval_metrics(
      model_dir, final_evaluation()), sigterm=cluster is None)


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
  checkpoint until the last evaluation: one at max_steps, or the one that
  meets early stopping's rule (the evaluator applies it: the workers, which
  follow its evaluations, have trained on meanwhile, and stop), or, when
  training stopped earlier, its last checkpoint's; returns it.

  `start()`, called once the chief has told how long training runs (the
  engine's evaluation job is built then, not while waiting), returns the
  engine's (evaluate_and_export(path, is_final): the result, exported as
  the final one when `is_final(result)`, or None when training deleted the
  checkpoint first; evaluate(path); export_final(path, result)). Bounded by
  the watchdog.
  """
  with cluster_watchdog(config.cluster_timeout_secs,
                        'new checkpoint') as watchdog:
    training = TrainingProgress(config)
    max_steps = training.read_max_steps(watchdog)
    evaluate_and_export, evaluate, export_final = start()
    is_final = _last_evaluation(config, max_steps)
    result, final = None, False
    for path in tf.train.checkpoints_iterator(
        config.model_dir, min_interval_secs=1, timeout=5,
        timeout_fn=lambda: training.chief_finished(max_steps)):
      watchdog.kick()
      evaluated = evaluate_and_export(path, is_final)
      watchdog.kick()
      if evaluated is not None:
        result = evaluated
        final = is_final(result)
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


def log_final_step(step, max_steps):
  """Says so when training ended past its steps: only a model_dir whose
  checkpoint was past them when the run began (a longer run's, or one of
  the estimator engine's parameter servers before each step claimed its
  count: estimator/step_apply.py), which Estimator does not train on."""
  if step > max_steps:
    _logger.info('Training ended at step %d, %d past its %d steps: '
                 'model_dir\'s checkpoint was past them when this run '
                 'began; the final checkpoint, evaluation and export are of '
                 'step %d', step, step - max_steps, max_steps, step)


def _last_evaluation(config, max_steps):
  """is_final(result) of the evaluator: an evaluation at max_steps, or the
  one that meets --early_stopping_evals' rule (decided once per step: the
  rule reads the evaluations in model_dir/eval, this one's included)."""
  decided = {}

  def is_final(result):
    step = result['global_step']
    if step not in decided:
      decided[step] = step >= max_steps or bool(
          config.early_stopping_evals and early_stopping.no_improvement(
              early_stopping.eval_accuracies(
                  layout.eval_dir(config.model_dir)),
              config.early_stopping_evals))
    return decided[step]
  return is_final
