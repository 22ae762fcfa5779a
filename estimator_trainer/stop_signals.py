"""SIGTERM (what Kubernetes and preemptible VMs send before killing) and
Ctrl-C while a run trains, for every engine: training stops after the
current step, saves it and skips the evaluation and export that would
follow; a first Ctrl-C does the same, then raises KeyboardInterrupt (the
CLI exits 130); a second one stops the process at once, saying so (exit
code 130). After the last step's save (the run's end: its final
evaluation, export and metrics.json) either stops at once: the step is
saved, and the rerun does what is left (training_progress.finish_ended).
"""

import contextlib
import logging
import os
import signal
import threading

from estimator_trainer.errors import INTERRUPTED_EXIT_CODE, Interrupted

_logger = logging.getLogger(__name__)


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


class StopSignals:
  """Records SIGTERM and a first SIGINT (Ctrl-C) instead of dying of them,
  while entered, so that training stops after the current step and saves it.

  A second Ctrl-C stops the process at once, saying so, with exit code 130:
  wherever its main thread is (inside TensorFlow no Python handler runs),
  a thread learns of it from the signal wakeup fd, which the interpreter's
  C-level handler writes at once. `sigterm=False` leaves SIGTERM alone: a
  cluster's tasks would have to stop together, or a handler of TensorFlow's
  watches it; `on_sigint()` is then called on the first Ctrl-C (to pass it
  on to that handler). `pass_sigterm(signum, frame)`, that handler: SIGTERM
  is recorded and passed on to it while training, and stops at once after
  (stop_at_once), since TensorFlow's acts only between training steps.
  """

  def __init__(self, sigterm=True, on_sigint=None, pass_sigterm=None):
    self.received = False  # SIGTERM or SIGINT.
    self.interrupted = False  # SIGINT.
    self._signals = (signal.SIGTERM, signal.SIGINT) if (
        sigterm or pass_sigterm) else (signal.SIGINT,)
    self._on_sigint = on_sigint
    self._pass_sigterm = pass_sigterm
    self._ended_at = None  # Training's last step: a signal stops at once.
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
    self.done()
    read, write, previous_fd = self._wakeup
    signal.set_wakeup_fd(previous_fd)
    os.close(write)  # Ends _watch, which closes `read`.
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)

  def stop_at_once(self, step):
    """Training has ended at `step`, saved: from now on a signal raises
    Preempted(step) at once, in the main thread (what follows training
    has no step to stop after), and now if one came already."""
    self._ended_at = step
    if self.received:
      self._stop()

  def done(self):
    """What follows training is done: a signal is only recorded again."""
    self._ended_at = None

  def _stop(self):
    step, self._ended_at = self._ended_at, None  # Once: not in clean-ups.
    raise Preempted(step)

  def _handle(self, signum, frame):
    self.received = True
    if (signum == signal.SIGTERM and self._pass_sigterm and
        self._ended_at is None):
      self._pass_sigterm(signum, frame)
    if signum == signal.SIGINT and not self.interrupted:
      self.interrupted = True
      if self._on_sigint:
        self._on_sigint()
    if self._ended_at is not None:
      self._stop()

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


def sigterm_ends_at_once():
  """Gives SIGTERM back its default, which ends the process at once, from
  the main thread (where handlers are set). Under multi_worker_mirrored
  TensorFlow's coordination service takes SIGTERM (a C++ preemption
  notifier, which only TF2's PreemptionCheckpointHandler reads): an
  estimator engine's cluster task trained on after it."""
  if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def finish(step, end, signals=None, sigterm=True):
  """Calls `end()`: what follows training that ended at `step` (saved),
  its final evaluation, export and metrics.json. SIGTERM or Ctrl-C stops it
  at once (StopSignals.stop_at_once), under `signals` (the StopSignals
  training ran under, which may hold a signal already) or its own.

  Returns what `end()` returns, or None when preempted; raises
  KeyboardInterrupt when interrupted (stopped).
  """
  if threading.current_thread() is not threading.main_thread():
    return end()  # Only the main thread may handle signals.
  with (contextlib.nullcontext(signals) if signals else
        StopSignals(sigterm)) as signals:
    return stopping(signals, end, ended_at=step)


def stopping(signals, body, ended_at=None):
  """body() under the entered `signals` (stopping at once from the start
  if training `ended_at` a step); its result, or None when stopped."""
  try:
    if ended_at is not None:
      signals.stop_at_once(ended_at)
    result = body()
    signals.done()  # In the try: a signal before it stops the run.
    return result
  except Preempted as e:
    stopped(signals, e.step)
    return None
