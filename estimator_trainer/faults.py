"""Faults training survives: preemption and divergence (every engine).

A NaN or Inf loss fails the run, naming the step. A single process (not a
cluster) also never checkpoints NaN or Inf weights, so that its latest
checkpoint is one to resume or roll back to; and on SIGTERM (what Kubernetes
and preemptible VMs send before killing) it stops after the current step,
saves it and skips the evaluation and export that would follow. A first
Ctrl-C (SIGINT) does the same, then raises KeyboardInterrupt (the CLI exits
130); a second one stops the process at once, saying so (exit code 130).
"""

import logging
import os
import signal
import threading

import numpy as np
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer.errors import INTERRUPTED_EXIT_CODE, Interrupted, TrainerError

_logger = logging.getLogger(__name__)


class DivergedError(TrainerError):
  """The loss or the weights became NaN or Inf."""


def stopped(signals, step):
  """After training stopped on `signals` (StopSignals) and saved `step`:
  says so in one line; raises Interrupted (a KeyboardInterrupt) after a
  Ctrl-C."""
  _logger.warning('%s at step %d: saved a checkpoint there; run the same '
                  'command again to resume',
                  'Interrupted' if signals.interrupted else 'Preempted', step)
  if signals.interrupted:
    raise Interrupted(f'interrupted at step {step}')


class Preempted(Exception):
  """Raised once the checkpoint of the current step is saved, to skip what
  follows training."""

  def __init__(self, step):
    super().__init__(f'preempted at step {step}')
    self.step = step


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


class StopSignals:
  """Records SIGTERM and a first SIGINT (Ctrl-C) instead of dying of them,
  while entered, so that training stops after the current step and saves it.

  A second Ctrl-C stops the process at once, saying so, with exit code 130:
  wherever its main thread is (inside TensorFlow no Python handler runs),
  a thread learns of it from the signal wakeup fd, which the interpreter's
  C-level handler writes at once. `sigterm=False` leaves SIGTERM alone: a
  cluster's tasks would have to stop together, or a handler of TensorFlow's
  watches it; `on_sigint()` is then called on the first Ctrl-C (to pass it
  on to that handler).
  """

  def __init__(self, sigterm=True, on_sigint=None):
    self.received = False  # SIGTERM or SIGINT.
    self.interrupted = False  # SIGINT.
    self._signals = (signal.SIGTERM, signal.SIGINT) if sigterm else (
        signal.SIGINT,)
    self._on_sigint = on_sigint
    self._previous = {}
    self._wakeup = None  # (read fd, write fd, the previous wakeup fd).

  def __enter__(self):
    self._previous = {signum: signal.signal(signum, self._handle)
                      for signum in self._signals}
    read, write = os.pipe()
    os.set_blocking(write, False)
    self._wakeup = read, write, signal.set_wakeup_fd(write)
    threading.Thread(target=self._watch, args=(read,), daemon=True).start()
    return self

  def __exit__(self, *exc_info):
    read, write, previous_fd = self._wakeup
    signal.set_wakeup_fd(previous_fd)
    os.close(write)  # Ends _watch, which closes `read`.
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)

  def _handle(self, signum, frame):
    del frame
    self.received = True
    if signum == signal.SIGINT and not self.interrupted:
      self.interrupted = True
      if self._on_sigint:
        self._on_sigint()

  def _watch(self, read):
    """Exits on the second SIGINT the wakeup fd reports."""
    count = 0
    with os.fdopen(read, 'rb', buffering=0) as wakeups:
      for data in iter(lambda: wakeups.read(64), b''):
        count += data.count(signal.SIGINT)
        if count >= 2:
          _logger.warning('Interrupted again: stopped at once, without '
                          'saving this step (the latest checkpoint stays)')
          for handler in logging.getLogger().handlers:
            handler.flush()
          os._exit(INTERRUPTED_EXIT_CODE)  # pylint: disable=protected-access


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
  exporting: a preempted task has seconds left, and no final result.
  """

  def __init__(self, signals):
    self._signals = signals

  def after_save(self, session, global_step_value):
    if self._signals.received:
      raise Preempted(global_step_value)

  def end(self, session, global_step_value):
    # No save before end() when a periodic one was at this very step.
    if self._signals.received:
      raise Preempted(global_step_value)


def _run_guarded(model_dir, run):
  """Calls `run(hooks, saving_listeners)` with the guards of this module.

  Returns its result, or None when preempted; raises KeyboardInterrupt
  when interrupted (stopped).
  """
  if threading.current_thread() is not threading.main_thread():
    # Only the main thread may handle signals: run without the handler.
    return run([], [FiniteCheckpointListener(model_dir)])
  with StopSignals() as signals:
    try:
      return run([_StopOnSignalHook(signals)],
                 [FiniteCheckpointListener(model_dir),
                  _PreemptedListener(signals)])
    except Preempted as e:
      stopped(signals, e.step)
      return None


def train_and_evaluate(estimator, train_spec, eval_spec):
  """`tf.estimator.train_and_evaluate` in a single process, guarded.

  Returns its result, or None when preempted: the checkpoint of the step
  reached is saved, nothing is evaluated or exported.
  """
  def run(hooks, listeners):
    return tf.estimator.train_and_evaluate(
        estimator,
        tf.estimator.TrainSpec(
            train_spec.input_fn, max_steps=train_spec.max_steps,
            hooks=(*train_spec.hooks, *hooks),
            saving_listeners=(*train_spec.saving_listeners, *listeners)),
        eval_spec)
  return _run_guarded(estimator.model_dir, run)


def train(estimator, input_fn, max_steps, hooks, saving_listeners=()):
  """`Estimator.train` in a single process, guarded; stops early when
  preempted."""
  _run_guarded(estimator.model_dir,
               lambda more_hooks, listeners: estimator.train(
                   input_fn, max_steps=max_steps, hooks=hooks + more_hooks,
                   saving_listeners=[*saving_listeners, *listeners]))
