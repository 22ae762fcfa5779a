"""Bounded waits: a cluster that cannot make progress fails, never hangs."""

import contextlib
import os
import subprocess
import sys

import tensorflow as tf

from estimator_trainer.errors import TrainerError

# Runs in a separate process: while TensorFlow waits for a missing peer it
# blocks in C++ holding the GIL (e.g. in context.ensure_initialized), where no
# thread or signal handler of this process can run.
_WATCHER = r'''
import os, select, signal, sys
parent, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
while True:
  if not select.select([0], [], [], timeout)[0]:
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    os.kill(parent, signal.SIGKILL)
    break
  if not os.read(0, 4096):
    break  # Stopped, or the parent is gone.
'''


class Watchdog:
  """Kills this process, after printing `error: <message>`, if not kicked
  for `timeout_secs`. As a context manager, stopped however the block
  ends (an error must not leave it to kill the process later)."""

  def __init__(self, timeout_secs, message):
    self._watcher = subprocess.Popen(
        [sys.executable, '-c', _WATCHER, str(os.getpid()), str(timeout_secs),
         message], stdin=subprocess.PIPE)

  def kick(self):
    try:
      os.write(self._watcher.stdin.fileno(), b'.')
    except (BrokenPipeError, ValueError):
      pass  # Already stopped.

  def stop(self):
    if not self._watcher.stdin.closed:
      self._watcher.stdin.close()
      self._watcher.wait()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.stop()


def cluster_watchdog(timeout_secs, waiting_for):
  """A Watchdog for a cluster task that waits for `waiting_for` (a training
  step, a new checkpoint) from its peers."""
  return Watchdog(
      timeout_secs,
      f'no {waiting_for} in {timeout_secs} s: a cluster task never started or '
      'died (--cluster_timeout_secs)')


class WatchdogHook(tf.compat.v1.train.SessionRunHook):
  """Kicks the watchdog after every training step."""

  def __init__(self, watchdog):
    self._watchdog = watchdog

  def after_run(self, run_context, run_values):
    self._watchdog.kick()


# A multi_worker_mirrored task's collective ops, once a peer stopped, stay
# aborted (TensorFlow: "Restart your program to reset").
PEER_LOST = ('a peer of this multi_worker_mirrored task stopped or became '
             'unreachable while training, which ends training for every '
             'task: restart the whole cluster; it resumes from the latest '
             'checkpoint')


# A TF2 parameter-server chief's ClusterCoordinator reruns a lost worker's
# steps; a lost ps's error (its variables are gone) it raises to the chief.
PS_LOST = ('a parameter server of this cluster stopped or became '
           'unreachable while training, which ends the chief\'s training: '
           'restart the chief once the parameter servers are up; it resumes '
           'from the latest checkpoint')


def _collective(config):
  """Whether `config` trains in a cluster on collective ops."""
  return (config.cluster is not None
          and config.strategy == 'multi_worker_mirrored')


def _lost(config):
  """What an UnavailableError of `config`'s TF2 training means: PEER_LOST,
  PS_LOST, or None (not a cluster's)."""
  if _collective(config):
    return PEER_LOST
  if config.cluster is not None and config.strategy == 'parameter_server':
    return PS_LOST
  return None


def peer_lost_hooks(config):
  """The Estimator engine's training hooks for PEER_LOST (PeerLostHook)."""
  return [PeerLostHook()] if _collective(config) else []


@contextlib.contextmanager
def peer_lost_fails(config):
  """A TF2 engine's training: under multi_worker_mirrored in a cluster, the
  UnavailableError of its collective ops fails with PEER_LOST, and their
  AbortedError too (a peer restarted within gRPC's reconnection: 'tried to
  connect with a different incarnation'); under parameter servers, the
  chief's with PS_LOST."""
  lost = _lost(config)
  if lost is None:
    yield
    return
  try:
    yield
  except (tf.errors.UnavailableError, tf.errors.AbortedError) as e:
    raise TrainerError(lost) from e


class PeerLostHook(tf.compat.v1.train.SessionRunHook):
  """The Estimator engine's multi_worker_mirrored training: PEER_LOST at
  once when a peer stops. MonitoredSession makes its session again after an
  UnavailableError or AbortedError, which lets parameter-server training
  ride out a restarted ps; but with collective ops aborted for good, every
  new session would restore and re-save the checkpoint and fail its first
  step, at full CPU, until --cluster_timeout_secs."""

  def __init__(self):
    self._trained = False

  def after_create_session(self, session, coord):
    if self._trained:
      raise TrainerError(PEER_LOST)

  def after_run(self, run_context, run_values):
    self._trained = True
