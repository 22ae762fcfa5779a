"""Clusters of real processes on loopback, through scripts/local_cluster.py,
and what their tasks printed. Every launch's whole output is kept in a
file (kept_output.py): a failing cluster test names it, so that the next
failure explains itself though an assertion shows only a tail."""

import json
import os
import re
import subprocess
import sys

import scripts_dir
import kept_output

LAUNCHER = scripts_dir.SCRIPTS / 'local_cluster.py'


def _run(command, timeout, env=None):
  """Runs `command` to its end, its output kept; returns the finished
  process."""
  try:
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=timeout, check=False, env=env)
  except subprocess.TimeoutExpired as e:
    kept_output.keep(command, e.stdout, e.stderr,
                     f'timed out after {timeout} s')
    raise
  kept_output.keep(command, result.stdout, result.stderr,
                   f'exit code {result.returncode}')
  return result


def launch(cluster_args, trainer_flags, timeout=600):
  """Runs the launcher with `cluster_args` (--workers=2, ...), every task
  with `trainer_flags`; returns the finished process."""
  return _run([sys.executable, str(LAUNCHER), *cluster_args, '--',
               *trainer_flags], timeout)


def launched_cluster(output):
  """The TF_CONFIG "cluster" the launcher printed in its `output`."""
  return json.loads(re.search(r'^\[launcher\] cluster (.*)$', output,
                              re.MULTILINE).group(1))


def restart_alone(command, cluster, index):
  """Runs `command` as worker `index` of `cluster` (TF_CONFIG's), as a
  supervisor restarts it after training ended, its peers gone: it must exit
  0 (not wait --cluster_timeout_secs for them); returns its log."""
  env = {**os.environ, 'TF_CONFIG': json.dumps(
      {'cluster': cluster, 'task': {'type': 'worker', 'index': index}})}
  result = _run(command, 300, env)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stderr


def task_lines(output, text):
  """{task: [lines containing text]} from the launcher's prefixed output."""
  found = {}
  for line in output.splitlines():
    if text in line and line.startswith('['):
      found.setdefault(line[1:line.index(']')], []).append(line)
  return found
