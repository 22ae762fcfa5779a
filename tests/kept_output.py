"""The whole output of a test's subprocesses, kept on disk while the test
runs: conftest.py names the files in a failing test's report and deletes
them when it passes. Directory: $TEST_LOGS_DIR, else test-logs/ in the
clone (ignored by git)."""

import os
import pathlib
import re

import warm_process

DIRECTORY = pathlib.Path(os.environ.get(
    'TEST_LOGS_DIR', pathlib.Path(__file__).resolve().parent.parent /
    'test-logs'))
_kept = []  # This test's files.


def _text(output):
  return output.decode(errors='replace') if isinstance(output, bytes) else (
      output or '')


def keep(command, stdout, stderr, outcome):
  """Writes a subprocess's `command`, `outcome`, stdout and stderr to a
  file of the running test."""
  test = os.environ.get('PYTEST_CURRENT_TEST', 'unknown').rsplit(' ', 1)[0]
  name = re.sub(r'[^\w.-]+', '_', test.split('::', 1)[-1])[:150]
  DIRECTORY.mkdir(parents=True, exist_ok=True)
  path = DIRECTORY / f'{name}.{len(_kept)}.{os.getpid()}.log'
  path.write_text(f'$ {" ".join(map(str, command))}\n{outcome}\n'
                  f'--- stdout ---\n{_text(stdout)}\n'
                  f'--- stderr ---\n{_text(stderr)}\n')
  _kept.append(path)


def run_ok(command, timeout=600):
  """Runs `command` to its end (warm where warm_process may start it), its
  output (text) kept; asserts that it exited 0, with its stderr's tail;
  returns the finished process."""
  result = warm_process.run(command, timeout)
  keep(command, result.stdout, result.stderr, f'exit code {result.returncode}')
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def settle(failed):
  """At a test's end: the paths of its kept files when it `failed`, which
  stay; else none, and they are deleted."""
  paths, _kept[:] = list(_kept), []
  if failed:
    return paths
  for path in paths:
    path.unlink(missing_ok=True)
  return []
