"""Leases: a file in model_dir that says a process is there for as long as
it is, and no longer. evaluator.json (an evaluator task runs) and lock.json
(a training run holds the model_dir: run_lock.py) are leases.

The holder's record (host, pid, since, command) carries a heartbeat, the
time it was last renewed, rewritten atomically every HEARTBEAT_SECS. A
reader takes a record as stale when its heartbeat is older than LEASE_SECS
(the hosts' clocks must agree to a few seconds), or at once when it was
written on this host by a pid that is gone (or by this very pid: a former
incarnation, as a restarted container's trainer often is).

The heartbeat is written by a process of its own: TensorFlow can hold the
GIL for minutes (a chief waiting for its peers: watchdog.py), when none of
the holder's threads would run. That process removes the file when the
holder releases it or dies alone (SIGTERM, SIGKILL); a file outlives its
holder only when both die (a killed container, a crashed machine), and is
stale then. A model_dir by URL (gs://...) gets the heartbeat from a thread
instead (a process would load TensorFlow again for tf.io.gfile, ~0.5 GB):
its file stays when the holder is killed, stale in a lease.
"""

import contextlib
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import threading
import time

from estimator_trainer import lease_beater
from estimator_trainer import outputs
from estimator_trainer.lease_beater import same_holder
from estimator_trainer.errors import TrainerError

_logger = logging.getLogger(__name__)

HEARTBEAT_SECS = 15
# Four heartbeats: a write to a remote file system may take seconds.
LEASE_SECS = 60
def new_record(**extra):
  """This process's record as a holder, renewed now; `extra` fields too."""
  now = time.time()
  return {'host': socket.gethostname(), 'pid': os.getpid(),
          'since': time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(now)),
          'command': shlex.join(getattr(sys, 'orig_argv', sys.argv)),
          'heartbeat': now, **extra}


def dumps(record):
  return json.dumps(record) + '\n'


def describe(record):
  """The holder as a message names it."""
  return (f'host {record.get("host")}, pid {record.get("pid")}, since '
          f'{record.get("since")}')


def read(path):
  """The record in `path`; None without the file; {} when it is not one
  (stale: `stale`)."""
  remote = '://' in path
  if remote:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if not tf.io.gfile.exists(path):
      return None
  try:
    if remote:
      with tf.io.gfile.GFile(path) as f:
        record = json.load(f)
    else:
      with open(path) as f:
        record = json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError):
    return {}
  return record if isinstance(record, dict) else {}


def age(record):
  """How old the record's heartbeat is, as a message says it."""
  if not isinstance(record.get('heartbeat'), (int, float)):
    return 'no heartbeat'
  return f'its heartbeat {time.time() - record["heartbeat"]:.0f} s old'


def _gone(pid):
  if pid == os.getpid():
    return True  # This process is not its holder: a former one of its pid.
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return True
  except PermissionError:
    pass  # Another user's: alive.
  return False


def stale(record):
  """Why the holder of `record` is gone, or None if it may be alive."""
  heartbeat = record.get('heartbeat')
  if not isinstance(heartbeat, (int, float)):
    return 'no lease record'
  if time.time() - heartbeat > LEASE_SECS:
    return f'older than a lease ({LEASE_SECS} s)'
  if record.get('host') == socket.gethostname() and isinstance(
      record.get('pid'), int) and _gone(record['pid']):
    return f'pid {record["pid"]} is gone from this host'
  return None


def live(path, what):
  """The record in `path` of `what` holds it, if its holder may be alive;
  None without one, or when stale, which is said in one line."""
  record = read(path)
  if record is None:
    return None
  why = stale(record)
  if why is None:
    return record
  _logger.warning('Ignored %s of %s (%s), %s: %s', path, what,
                  describe(record), age(record), why)
  return None


@contextlib.contextmanager
def hold(path, record):
  """Renews the lease `record` in `path` (written already) while the block
  runs; removes it after, unless it names another holder by then."""
  if '://' in path:
    with _beating_thread(path, record):
      yield
    return
  beater = subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, lease_beater.__file__, path, str(HEARTBEAT_SECS),
       json.dumps(record)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
  try:
    # Once it ignores the signals a terminal sends the whole group (Ctrl-C),
    # which would end it before the holder released the lease.
    if beater.stdout.readline() != b'ready\n':
      raise TrainerError(f'{path}: its heartbeat process ended as it started'
                         f' (exit code {beater.wait()})')
    beater.stdout.close()
    yield
  finally:
    beater.stdin.close()  # The beater removes the file and exits.
    beater.wait()


@contextlib.contextmanager
def _beating_thread(path, record):
  """hold's heartbeat for a URL: a thread."""
  stop = threading.Event()

  def beat():
    while not stop.wait(HEARTBEAT_SECS):
      current = read(path)
      if current and not same_holder(current, record):
        _logger.warning('%s names another holder (%s): this process no '
                        'longer renews it', path, describe(current))
        return
      outputs.write_atomic(path, dumps({**record, 'heartbeat': time.time()}))

  thread = threading.Thread(target=beat, daemon=True)
  thread.start()
  try:
    yield
  finally:
    stop.set()
    thread.join()
    current = read(path)
    if current is not None and same_holder(current, record):
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      tf.io.gfile.remove(path)
