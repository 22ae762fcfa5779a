import subprocess
import sys
import time

import pytest

# Times the watchdog.
pytestmark = pytest.mark.serial

# A watchdog kicked for 4 s then stopped; one whose block fails (the error
# handled, e.g. by the Python API's caller); then 3 s past both timeouts,
# during which neither may kill the process.
SCRIPT = '''
import sys, time
from estimator_trainer.watchdog import Watchdog
dog = Watchdog(2, 'nothing happened')
for _ in range(8):
  time.sleep(0.5)
  dog.kick()
dog.stop()
print('stopped', flush=True)
try:
  with Watchdog(1, 'late kill'):
    raise ValueError('failed')
except ValueError:
  pass
time.sleep(3)
print('alive')
'''


def test_a_stopped_watchdog_or_one_whose_block_failed_lets_the_process_run():
  start = time.monotonic()
  result = subprocess.run([sys.executable, '-c', SCRIPT], capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == 0 and result.stdout == 'stopped\nalive\n', (
      result.stderr[-3000:])
  # Their lines; TensorFlow 2.21 logs "round-off errors" at import on
  # oneDNN CPUs, whatever TF_CPP_MIN_LOG_LEVEL says.
  assert 'error: nothing happened' not in result.stderr
  assert 'late kill' not in result.stderr
  assert time.monotonic() - start > 7


def test_blocked_process_is_killed_with_one_line():
  # A main thread that never kicks, as when TensorFlow waits for a peer.
  script = ('from estimator_trainer.watchdog import Watchdog\n'
            'import tensorflow as tf, time\n'
            "dog = Watchdog(2, 'stuck')\n"
            'time.sleep(60)\n')
  start = time.monotonic()
  result = subprocess.run([sys.executable, '-c', script], capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == -9
  assert result.stderr.strip().splitlines()[-1] == 'error: stuck'
  assert time.monotonic() - start < 30
