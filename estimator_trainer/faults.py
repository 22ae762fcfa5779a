"""Faults training survives: preemption and divergence (every engine).

A NaN or Inf loss fails the run, naming the step. A single process (not a
cluster) also never checkpoints NaN or Inf weights, so that its latest
checkpoint is one to resume or roll back to; and on SIGTERM or Ctrl-C it
stops after the current step and saves it (stop_signals.py): here, the
estimator engine's hooks of both.
"""

import logging
import os
import threading

import numpy as np
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer.errors import TrainerError
from estimator_trainer import stop_signals
from estimator_trainer.stop_signals import Preempted, StopSignals

_logger = logging.getLogger(__name__)


class DivergedError(TrainerError):
  """The loss or the weights became NaN or Inf."""


def diverged(what, step, model_dir):
  latest = tf.train.latest_checkpoint(model_dir)
  # A step-0 checkpoint, of no training, goes as the run fails
  # (outputs.none_of_a_failed_run, checkpoints.none_untrained).
  kept = (f'the latest checkpoint is still {os.path.basename(latest)}'
          if latest and layout.checkpoint_step(latest) > 0 else
          'no checkpoint was saved')
  return DivergedError(f'{what} at step {step}: training diverged (a lower '
                       f'--learning_rate may help); {kept}')


class NonFiniteLossHook(tf.compat.v1.train.SessionRunHook):
  """Fails training at the first NaN or Inf loss, naming the step.

  Runs before Estimator's own NanTensorHook, whose message has no step and
  which lets Inf through. Raising skips the final checkpoint, and under
  multi_worker_mirrored, where training hooks run first, a periodic one due
  at that step.
  """

  def __init__(self, model_dir):
    self._model_dir = model_dir

  def begin(self):
    # Estimator's loss, over all replicas and workers: every worker of a
    # collective cluster fails at the same step.
    self._losses = tf.compat.v1.losses.get_losses()
    self._global_step = tf.compat.v1.train.get_global_step()

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._losses)

  def after_run(self, run_context, run_values):
    for loss in run_values.results:
      if not np.isfinite(loss):
        raise diverged(f'loss is {"NaN" if np.isnan(loss) else "Inf"}',
                        run_context.session.run(self._global_step),
                        self._model_dir)


class FiniteCheckpointListener(tf.compat.v1.train.CheckpointSaverListener):
  """Refuses to checkpoint NaN or Inf weights.

  Outside multi_worker_mirrored, Estimator's CheckpointSaverHook runs before
  the training hooks: a save due at the step that diverged would come before
  NonFiniteLossHook. Raising here skips it.
  """

  def __init__(self, model_dir):
    self._model_dir = model_dir

  def begin(self):
    self._finite = tf.reduce_all([
        tf.reduce_all(tf.math.is_finite(variable))
        for variable in tf.compat.v1.global_variables()
        if variable.dtype.base_dtype.is_floating])

  def before_save(self, session, global_step_value):
    if not session.run(self._finite):
      raise diverged('weights are NaN or Inf', global_step_value,
                      self._model_dir)


class _StopOnSignalHook(tf.compat.v1.train.SessionRunHook):
  """Stops training after the step during which SIGTERM or Ctrl-C came.

  Estimator's CheckpointSaverHook then saves that step, at its end().
  """

  def __init__(self, signals):
    self._signals = signals

  def after_run(self, run_context, run_values):
    if self._signals.received:
      run_context.request_stop()


class _PreemptedListener(tf.compat.v1.train.CheckpointSaverListener):
  """Raises Preempted once the current step is saved.

  Listed before the evaluation listener of `tf.estimator.train_and_evaluate`
  (TrainSpec's listeners come first), which it keeps from evaluating and
  exporting: a preempted task has seconds left, and no final result. At
  the last step a signal stops at once what follows (finish).
  """

  def __init__(self, signals, max_steps):
    self._signals = signals
    self._max_steps = max_steps

  def after_save(self, session, global_step_value):
    if self._signals.received:
      raise Preempted(global_step_value)
    if global_step_value >= self._max_steps:  # The evaluation listener's
      self._signals.stop_at_once(global_step_value)  # final one follows.

  def end(self, session, global_step_value):
    # No save before end() when a periodic one was at this very step.
    self._signals.stop_at_once(global_step_value)


def _run_guarded(model_dir, run, max_steps, then):
  """Calls `run(hooks, saving_listeners)` with the guards of this module,
  then `then(result)` (what follows training: finish).

  Returns its result, or None when preempted; raises KeyboardInterrupt
  when interrupted (stopped).
  """
  if threading.current_thread() is not threading.main_thread():
    # Only the main thread may handle signals: run without the handler.
    return then(run([], [FiniteCheckpointListener(model_dir)]))
  with StopSignals() as signals:
    # Training's end switches the signals to stop_at_once.
    return stop_signals.stopping(signals, lambda: then(run(
        [_StopOnSignalHook(signals)],
        [FiniteCheckpointListener(model_dir),
         _PreemptedListener(signals, max_steps)])))


def train_and_evaluate(estimator, train_spec, eval_spec,
                       then=lambda result: result):
  """`tf.estimator.train_and_evaluate` in a single process, guarded, then
  `then(its result)` (metrics.json), still guarded.

  Returns that, or None when preempted: the checkpoint of the step reached
  is saved, and what was left of the evaluation, export and `then` is not
  done.
  """
  def run(hooks, listeners):
    return tf.estimator.train_and_evaluate(
        estimator,
        tf.estimator.TrainSpec(
            train_spec.input_fn, max_steps=train_spec.max_steps,
            hooks=(*train_spec.hooks, *hooks),
            saving_listeners=(*train_spec.saving_listeners, *listeners)),
        eval_spec)
  return _run_guarded(estimator.model_dir, run, train_spec.max_steps, then)


def train(estimator, input_fn, max_steps, hooks, saving_listeners=()):
  """`Estimator.train` in a single process, guarded; stops early when
  preempted."""
  _run_guarded(estimator.model_dir,
               lambda more_hooks, listeners: estimator.train(
                   input_fn, max_steps=max_steps, hooks=hooks + more_hooks,
                   saving_listeners=[*saving_listeners, *listeners]),
               max_steps, lambda result: None)
