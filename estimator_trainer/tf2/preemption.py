"""SIGTERM (what Kubernetes and preemptible VMs send before killing) while a
TF2 engine trains.

One process saves the step it reached and stops. The workers of a
multi_worker_mirrored cluster must all save the same step, or the rerun
resumes from weights no worker had together: TensorFlow's
PreemptionCheckpointHandler does that. The worker that got the signal
publishes a step through the cluster's coordination service, every worker
saves when it gets there, then all stop and exit 0; the same command resumes
there. (It refuses parameter servers.) A Ctrl-C does the same, and the
interrupted process exits 130 (stop_signals.py).
"""

import contextlib
import os
import shutil
import signal
import tempfile
import threading

import tensorflow as tf

from estimator_trainer import stop_signals


class _Saved(Exception):
  """Raised by the handler's exit function, in place of its sys.exit."""


def _raise_saved():
  raise _Saved()


@contextlib.contextmanager
def watch(strategy):
  """Yields `stop(save)` and the stop_signals.StopSignals it reads (None outside
  the main thread; for stop_signals.finish at the end): every worker calls
  `stop` after each run of training steps (the same runs on every
  worker). Once training must end, `save()` having saved the current step
  (the step the cluster agreed on, in a cluster), it returns the signals
  that tell why (for stop_signals.stopped); until then None. A Ctrl-C stops as a
  SIGTERM does."""
  if threading.current_thread() is not threading.main_thread():
    # Only the main thread may handle signals: run without a handler.
    yield (lambda save: None), None
  elif not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    with stop_signals.StopSignals() as signals:
      yield (lambda save: signals if signals.received and (
          save() or True) else None), signals
  else:
    previous = signal.getsignal(signal.SIGTERM)
    # The handler restores and saves its own tf.train.Checkpoint; ours are
    # the job's (save_fn). It gets an empty one in a directory of its own,
    # so that its count of calls starts at 0 on every worker.
    scratch = tempfile.mkdtemp(prefix='preemption-')
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, tf.train.Checkpoint(), f'{scratch}/ckpt',
        tf.distribute.experimental.TerminationConfig(
            exit_fn=_raise_saved, save_fn=lambda save: save()))

    # The handler's SIGTERM handler (none where it polls GCE's metadata
    # server instead) acts only between steps: SIGTERM is passed on to it
    # while training, and stops the run's end at once. A Ctrl-C is passed on
    # as a SIGTERM.
    taken = signal.getsignal(signal.SIGTERM)
    try:
      with stop_signals.StopSignals(
          sigterm=False, pass_sigterm=None if taken is previous else taken,
          on_sigint=lambda: os.kill(os.getpid(), signal.SIGTERM)) as signals:

        def stop(save):
          try:
            handler.save_checkpoint_if_preempted(save)
          except _Saved:
            return signals
          return None

        yield stop, signals
    finally:
      _stop_watching(handler)
      signal.signal(signal.SIGTERM, previous)
      shutil.rmtree(scratch, ignore_errors=True)


def _stop_watching(handler):
  """Stops the handler's threads while the cluster is still up. Left to
  its __del__, a worker's PeerTerminationWatcher still waited on the chief's
  coordination service when that went, and printed its UnavailableError
  ('Socket closed') as a traceback at a normal finish. Setting the key it
  waits on (what __del__ does, as a private method: no public one) frees
  every worker's watcher."""
  for name in ('_stop_cluster_wise_termination_watcher_thread',
               '_stop_poll_termination_signal_thread'):
    getattr(handler, name, lambda: None)()
