"""The estimator engine's early stopping: a hook that stops training by
early_stopping.py's rule, read from the evaluations in model_dir/eval."""

import tensorflow as tf

from estimator_trainer import early_stopping


class _StopHook(tf.estimator.SessionRunHook):
  """Requests a stop when `should_stop()`, checked every N global steps."""

  def __init__(self, should_stop, every_steps):
    self._should_stop = should_stop
    self._every_steps = every_steps
    self._next_check = 0

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def before_run(self, run_context):
    return tf.estimator.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    if run_values.results >= self._next_check:
      self._next_check = run_values.results + self._every_steps
      if self._should_stop():
        run_context.request_stop()


def make_hook(estimator, patience, check_every_steps=100):
  """Stops training once `patience` evaluations brought no better accuracy.

  Each task decides from the shared eval summaries, except under
  multi_worker_mirrored, where workers that stopped apart would hang the
  all-reduce: there TensorFlow's hook agrees on the stop through a variable.
  TensorFlow's `make_early_stopping_hook` cannot serve the other strategies:
  it sends every `train_distribute` down that multi-worker path (its check
  is a generator, always true), which fails under MirroredStrategy.
  """
  def should_stop():
    return early_stopping.no_improvement(
        early_stopping.eval_accuracies(estimator.eval_dir()), patience)

  strategy = estimator.config.train_distribute
  if strategy and 'Collective' in type(strategy).__name__:
    return tf.estimator.experimental.make_early_stopping_hook(
        estimator, should_stop, run_every_secs=None,
        run_every_steps=check_every_steps)
  return _StopHook(should_stop, check_every_steps)
