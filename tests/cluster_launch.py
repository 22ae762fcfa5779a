"""Clusters of real processes on loopback, through scripts/local_cluster.py
(its run_cluster in this process, each task started warm: warm_process.py),
and what their tasks printed. Every launch's whole output is kept in a
file (kept_output.py): a failing cluster test names it, so that the next
failure explains itself though an assertion shows only a tail."""

import _thread
import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from unittest import mock

import tensorflow as tf

from estimator_trainer import training_progress
import cli_config
import scripts_dir
import kept_output
import warm_process

LAUNCHER = scripts_dir.SCRIPTS / 'local_cluster.py'
local_cluster = scripts_dir.load('local_cluster')


def _run(command, timeout, env=None):
  """Runs `command` to its end, its output kept; returns the finished
  process."""
  try:
    result = warm_process.run(command, timeout, env)
  except subprocess.TimeoutExpired as e:
    kept_output.keep(command, e.stdout, e.stderr,
                     f'timed out after {timeout} s')
    raise
  kept_output.keep(command, result.stdout, result.stderr,
                   f'exit code {result.returncode}')
  return result


def launch(cluster_args, trainer_flags, timeout=600):
  """Runs the launcher with `cluster_args` (--workers=2, ...), every task
  with `trainer_flags`; returns what it printed and its exit code, as a
  finished process. Past `timeout` s the launcher gets Ctrl-C (it stops its
  tasks) and TimeoutExpired is raised."""
  argv = [*cluster_args, '--', *trainer_flags]
  command = [sys.executable, str(LAUNCHER), *argv]
  output = io.StringIO()
  expired = threading.Event()
  def expire():
    expired.set()
    _thread.interrupt_main()
  timer = threading.Timer(timeout, expire)
  timer.start()
  try:
    with contextlib.redirect_stdout(output):
      code = local_cluster.main(argv, popen=warm_process.popen)
  finally:
    timer.cancel()
  if expired.is_set():
    kept_output.keep(command, output.getvalue(), '',
                     f'timed out after {timeout} s')
    raise subprocess.TimeoutExpired(command, timeout, output.getvalue())
  kept_output.keep(command, output.getvalue(), '', f'exit code {code}')
  return subprocess.CompletedProcess(command, code, output.getvalue(), '')


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


def restart_alone_in_process(command, cluster, index, caplog):
  """restart_alone's run in this process, a TensorFlow import less: the
  engine's part. The CLI's part of such a restart (exit 0 at once, through
  the listen shim) is test_cluster_runs'
  test_tf2_training_tasks_evaluate_when_no_tf_config_lists_the_evaluator's.
  The task must see training ended first, and make no multi-worker
  strategy: one would wait for its peers in this process (its watchdog
  killing the whole serial part), so a regression that makes one fails
  here at once. Returns its log."""
  cli = [sys.executable, '-m', 'estimator_trainer.run']
  assert command[:len(cli)] == cli, command
  argv = command[len(cli):]
  env = {name: value for name, value in os.environ.items()
         if name != 'TF_CONFIG'}
  env['TF_CONFIG'] = json.dumps(
      {'cluster': cluster, 'task': {'type': 'worker', 'index': index}})
  caplog.clear()
  with caplog.at_level(logging.INFO), mock.patch.dict(
      os.environ, env, clear=True), mock.patch.object(
          tf.distribute.experimental, 'MultiWorkerMirroredStrategy',
          side_effect=AssertionError(
              'a task restarted after the end made a multi-worker '
              'strategy')):
    assert training_progress.training_ended(cli_config.config_from(argv))
    cli_config.run_in_process(argv)
  return caplog.text


def task_lines(output, text):
  """{task: [lines containing text]} from the launcher's prefixed output."""
  found = {}
  for line in output.splitlines():
    if text in line and line.startswith('['):
      found.setdefault(line[1:line.index(']')], []).append(line)
  return found
