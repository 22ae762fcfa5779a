"""TF_CONFIG parsing and validation (no TensorFlow runtime needed)."""

import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from estimator_trainer import cluster
from estimator_trainer import training_progress
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError, UsageError
import scripts_dir

TWO_WORKERS = {'worker': ['127.0.0.1:1', '127.0.0.1:2']}


def _tf_config(jobs, task_type='worker', index=0):
  return json.dumps({'cluster': jobs,
                     'task': {'type': task_type, 'index': index}})


def test_unset_or_clusterless_tf_config_means_local():
  assert cluster.parse(None) is None
  assert cluster.parse('') is None
  assert cluster.parse('{"task": {"type": "worker", "index": 0}}') is None


def test_evaluator_is_kept_out_of_the_training_cluster():
  jobs = {**TWO_WORKERS, 'evaluator': ['127.0.0.1:3']}
  parsed = cluster.parse(_tf_config(jobs, 'evaluator'))
  assert parsed.task_type == 'evaluator' and parsed.has_evaluator
  assert json.loads(parsed.tf_config())['cluster'] == TWO_WORKERS
  worker = cluster.parse(_tf_config(jobs, 'worker', 1))
  assert worker.has_evaluator and not worker.is_chief
  assert worker.num_trainers == 2


def test_chief_is_the_chief_task_or_worker_0():
  assert cluster.parse(_tf_config(TWO_WORKERS)).is_chief
  jobs = {'chief': ['h:1'], 'worker': ['h:2'], 'ps': ['h:3']}
  assert cluster.parse(_tf_config(jobs, 'chief')).is_chief
  assert not cluster.parse(_tf_config(jobs, 'worker')).is_chief


BAD_TF_CONFIGS = [
    ('{"cluster": ', 'multi_worker_mirrored', 'TF_CONFIG: not valid JSON'),
    ('[1, 2]', 'multi_worker_mirrored', 'must be a JSON object'),
    (json.dumps({'cluster': TWO_WORKERS}), 'multi_worker_mirrored',
     'TF_CONFIG: missing "task"'),
    (_tf_config(TWO_WORKERS, 'worker', 2), 'multi_worker_mirrored',
     'TF_CONFIG: task worker:2 is not in the cluster (2 worker task(s))'),
    (_tf_config(TWO_WORKERS, 'worker', -1), 'multi_worker_mirrored',
     'task index must be an integer >= 0'),
    (_tf_config(TWO_WORKERS, 'master'), 'multi_worker_mirrored',
     "unknown task type 'master'"),
    (_tf_config({'master': ['h:1']}), 'multi_worker_mirrored',
     "unknown task type 'master' in \"cluster\""),
    (_tf_config({'worker': 'h:1'}), 'multi_worker_mirrored',
     'must be a non-empty list of "host:port"'),
    (_tf_config({'chief': ['h:1', 'h:2']}, 'chief'), 'multi_worker_mirrored',
     'at most one chief'),
    (_tf_config({'ps': ['h:1']}, 'ps'), 'parameter_server',
     'the cluster has no chief or worker'),
    (_tf_config({**TWO_WORKERS, 'ps': ['h:3']}), 'multi_worker_mirrored',
     '"ps" tasks do not fit --strategy=multi_worker_mirrored'),
    (_tf_config(TWO_WORKERS), 'parameter_server',
     '--strategy=parameter_server needs "ps" and "chief" tasks'),
    (_tf_config(TWO_WORKERS), 'mirrored',
     'a cluster of 2 training task(s) needs --strategy=multi_worker_mirrored'),
]


@pytest.mark.parametrize('tf_config, strategy, message', BAD_TF_CONFIGS)
def test_bad_tf_config_is_a_usage_error(monkeypatch, tf_config, strategy,
                                        message):
  monkeypatch.setenv('TF_CONFIG', tf_config)
  with pytest.raises(UsageError) as e:
    TrainConfig.from_environment(model_dir='/tmp/x', strategy=strategy)
  assert message in str(e.value)


@pytest.mark.estimator
def test_clusters_train_through_train_and_evaluate(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', _tf_config(TWO_WORKERS))
  with pytest.raises(UsageError, match='--mode=train_and_evaluate'):
    TrainConfig.from_environment(model_dir='/tmp/x',
                                 strategy='multi_worker_mirrored',
                                 mode='train')


def test_eval_strategy_must_be_local_in_a_cluster(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', _tf_config(TWO_WORKERS))
  with pytest.raises(UsageError, match='--eval_strategy=multi_worker_mirrored'
                     ': evaluation runs on one task'):
    TrainConfig.from_environment(model_dir='/tmp/x',
                                 strategy='multi_worker_mirrored',
                                 eval_strategy='multi_worker_mirrored')


def test_tf_config_environment_sets_or_hides_then_restores(monkeypatch):
  outside = _tf_config({**TWO_WORKERS, 'evaluator': ['127.0.0.1:3']})
  monkeypatch.setenv('TF_CONFIG', outside)
  task = cluster.parse(outside)
  with cluster.tf_config_environment(task):
    # The evaluator is not part of the cluster TensorFlow sees.
    assert json.loads(os.environ['TF_CONFIG']) == json.loads(
        _tf_config(TWO_WORKERS))
    with cluster.tf_config_environment(None):
      assert 'TF_CONFIG' not in os.environ
    assert os.environ['TF_CONFIG'] == task.tf_config()
  assert os.environ['TF_CONFIG'] == outside
  monkeypatch.delenv('TF_CONFIG')
  with cluster.tf_config_environment(task):
    assert os.environ['TF_CONFIG'] == task.tf_config()
  assert 'TF_CONFIG' not in os.environ


def test_the_evaluator_fails_when_training_ended_without_a_checkpoint(
    tmp_path):
  # Not the initial weights evaluated and exported as the final model.
  config = TrainConfig(model_dir=str(tmp_path), cluster_timeout_secs=60,
                       cluster=cluster.Cluster(
                           jobs={'worker': ['localhost:1']},
                           task_type='evaluator', task_index=0,
                           has_evaluator=True))
  progress = training_progress.TrainingProgress(config)
  progress.write_train_spec(max_steps=10, global_batch_size=64)
  progress_of_the_chief = training_progress.TrainingProgress(
      dataclasses.replace(config, cluster=dataclasses.replace(
          config.cluster, task_type='worker')))
  progress_of_the_chief.mark_finished(max_steps=10)
  started = []

  with pytest.raises(TrainerError, match='without a checkpoint in'):
    training_progress.follow_checkpoints(config,
                                         lambda: started.append(1) or (
                                             None, None, None))
  assert started == [1]


def test_local_cluster_ports_are_free_distinct_and_not_ephemeral():
  """The launcher's ports lie outside the range the kernel hands out for
  bind(port 0) and outgoing connections, so nothing else takes them before
  the tasks bind."""
  with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
    low, high = map(int, f.read().split())
  ports = scripts_dir.load('local_cluster').free_ports(20)
  assert len(set(ports)) == 20
  assert [port for port in ports if low <= port <= high] == []
  for port in ports:
    with socket.socket() as s:
      s.bind(('127.0.0.1', port))  # Free: nothing holds it.


class _FakeCluster:
  """scripts/local_cluster.py running two workers that are `script`s (each
  stands in for the Python of a trainer), and what it printed so far.

  Every wait is bounded: a launcher that does not print or end in time
  fails the test, and the tasks (in sessions of their own, which the
  launcher would have stopped) are killed, by the process groups they
  note in $FAKE_TASK_PIDS."""

  TIMEOUT = 60

  def __init__(self, tmp_path, script):
    task = tmp_path / 'task'
    self.pids = tmp_path / 'pids'
    self.pids.touch()
    task.write_text(script)
    task.chmod(0o755)
    driver = ('import sys; sys.path.insert(0, sys.argv[1]); '
              'import local_cluster as l; '
              'cluster, tasks = l.make_cluster(False, 2, 0, False); '
              'sys.exit(l.run_cluster(cluster, tasks, [], '
              'python=sys.argv[2]))')
    self.launcher = subprocess.Popen(
        [sys.executable, '-c', driver, str(scripts_dir.SCRIPTS), str(task)],
        stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, FAKE_TASK_PIDS=str(self.pids)),
        # As a job a non-interactive shell starts with & (CI's tests run
        # so): SIGINT ignored, which the launcher must not keep.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    self.output = ''
    self._lines = queue.Queue()
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    for line in self.launcher.stdout:
      self._lines.put(line)
    self._lines.put(None)  # End of output.

  def read_until(self, text, count):
    deadline = time.monotonic() + self.TIMEOUT
    while self.output.count(text) < count:
      try:
        line = self._lines.get(timeout=max(0, deadline - time.monotonic()))
      except queue.Empty:
        self._kill()
        pytest.fail(f'no {count} x {text!r} in {self.TIMEOUT} s: '
                    f'{self.output}')
      assert line is not None, self.output  # Not ended before.
      self.output += line

  def end(self):
    """The launcher's exit code, once it has ended (all read)."""
    try:
      code = self.launcher.wait(timeout=self.TIMEOUT)
    except subprocess.TimeoutExpired:
      self._kill()
      pytest.fail(f'the launcher did not end in {self.TIMEOUT} s: '
                  f'{self.output}')
    self._reader.join(timeout=self.TIMEOUT)
    while not self._lines.empty():
      self.output += self._lines.get() or ''
    return code

  def _kill(self):
    self.launcher.kill()
    for pid in self.pids.read_text().split():
      try:
        os.killpg(int(pid), signal.SIGKILL)
      except ProcessLookupError:
        pass


def test_local_cluster_passes_sigterm_on_to_every_task(tmp_path):
  """A scheduler stopping the launcher stops its tasks, as Ctrl-C does: each
  gets SIGTERM (and saves, as preempted), none is left running."""
  cluster = _FakeCluster(tmp_path, "#!/bin/sh\necho $$ >> $FAKE_TASK_PIDS\n"
                         "trap 'echo stopped; exit 0' TERM\n"
                         'echo started\nwhile :; do sleep 0.1; done\n')
  cluster.read_until('started', 2)  # Both tasks run.
  cluster.launcher.send_signal(signal.SIGTERM)
  assert cluster.end() == 128 + signal.SIGTERM, cluster.output
  assert ('[worker:0] stopped' in cluster.output and
          '[worker:1] stopped' in cluster.output)
  assert '[launcher] exit codes: worker:0=0, worker:1=0' in cluster.output


def test_local_cluster_passes_ctrl_c_on_to_every_task_and_a_second_too(
    tmp_path):
  """Ctrl-C in the launcher's terminal reaches the launcher alone (its
  tasks run in sessions of their own): it passes it on to every task, which
  saves and stops as interrupted; a second one too, which stops them at
  once. (The tasks here stop at the second.)"""
  cluster = _FakeCluster(tmp_path, "#!/bin/sh\necho $$ >> $FAKE_TASK_PIDS\n"
                         "n=0\ntrap 'n=$((n+1)); echo \"got INT $n\"; "
                         "[ $n = 2 ] && exit 130' INT\n"
                         'echo started\nwhile :; do sleep 0.1; done\n')
  cluster.read_until('started', 2)  # Both tasks run.
  cluster.launcher.send_signal(signal.SIGINT)
  cluster.read_until('got INT 1', 2)
  cluster.launcher.send_signal(signal.SIGINT)
  assert cluster.end() == 130, cluster.output
  assert ('[worker:0] got INT 2' in cluster.output and
          '[worker:1] got INT 2' in cluster.output)
  assert ('[launcher] exit codes: worker:0=130, worker:1=130' in
          cluster.output)
  assert 'Traceback' not in cluster.output
