"""One model_dir, one training run: the lock a training run holds in its
model_dir (layout.lock_file), a lease (lease.py) recording the cluster it
is of. A second training run is refused at once (ModelDirInUse, exit 2),
unless the holder is gone (its lease stale: taken over, in one line) or a
task of the same TF_CONFIG cluster (a restarted chief: taken over too).

A local or shared (NFS) model_dir's lock is made by a hard link, which
creates a file whole or fails if one exists, atomically, on NFS too. A URL
(gs://...) has no such call through tf.io.gfile: two runs that start
within a moment may both see no lock and both write one; the one whose
record is overwritten learns of it at its next heartbeat, when it stops
renewing the lease, and says so (docs/guide/faults.md).
"""

import contextlib
import logging
import os

from estimator_trainer import layout
from estimator_trainer import lease
from estimator_trainer import outputs
from estimator_trainer.errors import ModelDirInUse

_logger = logging.getLogger(__name__)


@contextlib.contextmanager
def held(model_dir, cluster):
  """model_dir's lock, held while the block runs, for a training run alone
  (`cluster` None) or the chief of `cluster` (a cluster.Cluster)."""
  # The lock is the run's first write: the jobs' own check comes too late.
  outputs.require_writable_dir(model_dir)
  path = layout.lock_file(model_dir)
  record = lease.new_record(cluster=cluster.jobs if cluster else None)
  holder = _acquire(path, record)
  if holder is not None:
    raise ModelDirInUse(
        f'{model_dir} is in use by another training run ({lease.describe(holder)}'
        f': {holder.get("command")}); let it finish or stop it, or give '
        f'another --model_dir ({path} is taken over once its holder is '
        f'gone: at once on its host, elsewhere {lease.LEASE_SECS} s after '
        'its last heartbeat)')
  with lease.hold(path, record):
    yield


def _acquire(path, record):
  """Writes `record` as the lock in `path`, taking over one whose holder
  is gone or a peer; returns the live holder's record instead."""
  for _ in range(3):  # Each retry follows a race with another run.
    holder = lease.read(path)  # First: a refused run writes nothing.
    if holder is None:
      if _create(path, record):
        return None
      continue
    why = ('a task of this cluster' if record['cluster'] is not None
           and holder.get('cluster') == record['cluster'] else
           lease.stale(holder))
    if why is None:
      return holder
    if _take_over(path, holder, record):
      _logger.warning('Took over %s from %s, %s: %s', path,
                      lease.describe(holder), lease.age(holder), why)
      return None
  return lease.read(path) or {}


def _create(path, record):
  """Writes `record` to `path` if there is no file there; whether it did."""
  if '://' in path:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if tf.io.gfile.exists(path):
      return False
    outputs.write_atomic(path, lease.dumps(record))
    return True
  tmp = f'{path}.new-{os.getpid()}'
  outputs.write_atomic(tmp, lease.dumps(record))
  try:
    os.link(tmp, path)
    return True
  except FileExistsError:
    # NFS retries a link whose reply was lost, failing it: the count tells.
    return os.stat(tmp).st_nlink == 2
  finally:
    os.remove(tmp)


def _take_over(path, holder, record):
  """Replaces the stale lock `holder` in `path` with `record`; False if
  another run's lock was there by then."""
  if '://' in path:
    if lease.read(path) != holder:
      return False
    outputs.write_atomic(path, lease.dumps(record))
    return True
  aside = f'{path}.stale-{os.getpid()}'
  try:
    os.rename(path, aside)  # One of two runs taking over gets the file.
  except FileNotFoundError:
    return False
  moved = lease.read(aside)
  if moved != holder:  # Another run's lock, made meanwhile: put back.
    with contextlib.suppress(FileExistsError):
      os.link(aside, path)
    os.remove(aside)
    return False
  os.remove(aside)
  return _create(path, record)
