"""Clusters of real processes on loopback, through scripts/local_cluster.py,
and what their tasks printed. Every launch's whole output is kept in a
file (kept_output.py): a failing cluster test names it, so that the next
failure explains itself though an assertion shows only a tail."""

import subprocess
import sys

import scripts_dir
import kept_output

LAUNCHER = scripts_dir.SCRIPTS / 'local_cluster.py'


def launch(cluster_args, trainer_flags, timeout=600):
  """Runs the launcher with `cluster_args` (--workers=2, ...), every task
  with `trainer_flags`; returns the finished process."""
  command = [sys.executable, str(LAUNCHER), *cluster_args, '--',
             *trainer_flags]
  try:
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=timeout, check=False)
  except subprocess.TimeoutExpired as e:
    kept_output.keep(command, e.stdout, e.stderr,
                     f'timed out after {timeout} s')
    raise
  kept_output.keep(command, result.stdout, result.stderr,
                 f'exit code {result.returncode}')
  return result


def task_lines(output, text):
  """{task: [lines containing text]} from the launcher's prefixed output."""
  found = {}
  for line in output.splitlines():
    if text in line and line.startswith('['):
      found.setdefault(line[1:line.index(']')], []).append(line)
  return found
