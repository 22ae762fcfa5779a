"""warm_process: which commands start warm, and that a warm process ends as
a cold one does (its exit code, its output) and its CPU is counted."""

import os
import sys

import pytest

import warm_process

_LISTEN = [sys.executable, '-m', 'estimator_trainer.listen']


def test_only_the_suites_environment_but_tf_config_starts_warm():
  env = dict(os.environ)
  assert warm_process.warm(_LISTEN, None)
  assert warm_process.warm(_LISTEN, {**env, 'TF_CONFIG': '{}'})
  assert not warm_process.warm(_LISTEN, {**env, 'PYTHONPATH': '/elsewhere'})
  assert not warm_process.warm(
      _LISTEN, {k: v for k, v in env.items() if k != 'PATH'})
  assert not warm_process.warm([sys.executable, 'script.py'], None)
  assert not warm_process.warm(['python3', '-m', 'estimator_trainer.listen'],
                               None)


# The server's start (a TensorFlow import) is the serial part's, which its
# cluster and fault tests start anyway.
@pytest.mark.serial
@pytest.mark.parametrize('argv', [[], ['--help']])
def test_a_warm_process_ends_as_a_cold_one(argv):
  warm = warm_process.run([*_LISTEN, *argv], 60)
  cold = warm_process.run([*_LISTEN, *argv], 60, {**os.environ,
                                                   'PYTHONPATH': ''})
  assert (warm.returncode, warm.stdout, warm.stderr) == (
      cold.returncode, cold.stdout, cold.stderr)
  assert warm.returncode == (0 if argv else 2)
  assert 'runs COMMAND' in warm.stdout + warm.stderr


@pytest.mark.serial
def test_a_warm_process_s_cpu_is_counted():
  """Its CPU is the server's children's, not this process's: counted all
  the same (listen executes the command in the warm process)."""
  before = warm_process.cpu_seconds()
  busy = warm_process.run(
      [*_LISTEN, sys.executable, '-c', 'sum(range(5 * 10**7))'], 60)
  assert busy.returncode == 0, busy.stderr
  assert warm_process.cpu_seconds() - before > 0.25
