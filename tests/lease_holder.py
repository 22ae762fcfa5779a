"""A process holding a lease, as a trainer does, without TensorFlow: the
tests kill it as a trainer would be killed. `python lease_holder.py lock
MODEL_DIR` holds MODEL_DIR's run lock (run_lock.held); `... evaluator
MODEL_DIR` announces an evaluator there (evaluator.json). It prints `held`
once it holds it, then waits to be stopped."""

import signal
import subprocess
import sys
import time

from estimator_trainer import layout
from estimator_trainer import lease
from estimator_trainer import outputs
from estimator_trainer import run_lock


def start(kind, model_dir, **kwargs):
  """The holder process, once it holds; its stdout a pipe."""
  proc = subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, __file__, kind, str(model_dir)],
      stdout=subprocess.PIPE, text=True, **kwargs)
  assert proc.stdout.readline() == 'held\n'
  return proc


def _hold(kind, model_dir):
  if kind == 'lock':
    return run_lock.held(model_dir, None)
  path = layout.evaluator_file(model_dir)
  record = lease.new_record()
  outputs.write_atomic(path, lease.dumps(record))  # As the evaluator does.
  return lease.hold(path, record)


if __name__ == '__main__':
  # Ctrl-C unwinds it, as a trainer started from a terminal: a test run
  # started in the background of a shell without job control hands its
  # children SIGINT ignored, and the holder then slept its 600 s out.
  signal.signal(signal.SIGINT, signal.default_int_handler)
  with _hold(sys.argv[1], sys.argv[2]):
    print('held', flush=True)
    time.sleep(600)
