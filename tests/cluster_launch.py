"""Clusters of real processes on loopback, through scripts/local_cluster.py,
and what their tasks printed."""

import subprocess
import sys

import scripts_dir

LAUNCHER = scripts_dir.SCRIPTS / 'local_cluster.py'


def launch(cluster_args, trainer_flags, timeout=600):
  """Runs the launcher with `cluster_args` (--workers=2, ...), every task
  with `trainer_flags`; returns the finished process."""
  return subprocess.run(
      [sys.executable, str(LAUNCHER), *cluster_args, '--', *trainer_flags],
      capture_output=True, text=True, timeout=timeout, check=False)


def task_lines(output, text):
  """{task: [lines containing text]} from the launcher's prefixed output."""
  found = {}
  for line in output.splitlines():
    if text in line and line.startswith('['):
      found.setdefault(line[1:line.index(']')], []).append(line)
  return found
