import subprocess
import sys
import time

import pytest

# Times the watchdog.
pytestmark = pytest.mark.serial

SCRIPT = '''
import sys, time
from estimator_trainer.watchdog import Watchdog
dog = Watchdog(2, 'nothing happened')
for _ in range({kicks}):
  time.sleep(0.5)
  dog.kick()
dog.stop()
print('stopped')
time.sleep({sleep_after})
'''


def _run(kicks, sleep_after=0):
  start = time.monotonic()
  result = subprocess.run(
      [sys.executable, '-c', SCRIPT.format(kicks=kicks,
                                           sleep_after=sleep_after)],
      capture_output=True, text=True, timeout=120, check=False)
  return result, time.monotonic() - start


def test_kicked_watchdog_lets_the_process_run_and_stop():
  result, elapsed = _run(kicks=8, sleep_after=3)  # 4 s kicked, 3 s stopped.
  assert result.returncode == 0 and result.stdout == 'stopped\n'
  # Its one line; TensorFlow 2.21 logs "round-off errors" at import on
  # oneDNN CPUs, whatever TF_CPP_MIN_LOG_LEVEL says.
  assert 'error: nothing happened' not in result.stderr
  assert elapsed > 7


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


def test_a_watchdog_block_that_fails_stops_its_watchdog():
  # The error is handled (e.g. the Python API's caller); 3 s later, past the
  # 1 s timeout, the process must still be alive.
  script = ('from estimator_trainer.watchdog import Watchdog\n'
            'import time\n'
            'try:\n'
            "  with Watchdog(1, 'late kill'):\n"
            "    raise ValueError('failed')\n"
            'except ValueError:\n'
            '  pass\n'
            'time.sleep(3)\n'
            "print('alive')\n")
  result = subprocess.run([sys.executable, '-c', script], capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == 0 and result.stdout == 'alive\n'
  assert 'late kill' not in result.stderr
