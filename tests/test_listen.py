"""A cluster task's gRPC server listens only on its TF_CONFIG address."""

import json
import logging
import os
import socket
import subprocess
import sys
import time

import pytest

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import listen
from estimator_trainer.errors import UsageError

_WILDCARDS = ('00000000', '00000000000000000000000000000000')


def _cluster(jobs, task_type='worker', index=0):
  return cluster_lib.parse(json.dumps(
      {'cluster': jobs, 'task': {'type': task_type, 'index': index}}))


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _listening_addresses(port):
  """Local addresses (hex, as /proc/net shows them) listening on `port`."""
  found = []
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    with open(table) as f:
      for line in f.read().splitlines()[1:]:
        fields = line.split()
        address, hex_port = fields[1].split(':')
        if fields[3] == '0A' and int(hex_port, 16) == port:  # 0A: LISTEN
          found.append(address)
  return found


def test_task_address():
  jobs = {'chief': ['10.0.0.1:2222'], 'worker': ['[::1]:2223'],
          'evaluator': ['e:1']}
  assert listen.task_address(_cluster(jobs, 'chief')) == ('10.0.0.1', 2222)
  assert listen.task_address(_cluster(jobs, 'worker')) == ('::1', 2223)
  assert listen.task_address(_cluster(jobs, 'evaluator')) is None
  with pytest.raises(UsageError, match="'h:http' has no valid port"):
    listen.task_address(_cluster({'worker': ['h:http']}))


def test_local_ip_accepts_only_this_machines_addresses():
  assert listen.local_ip('127.0.0.1', 2222) == '127.0.0.1'
  assert listen.local_ip('localhost', 2222) in ('127.0.0.1', '::1')
  with pytest.raises(UsageError, match=r'192\.0\.2\.1:2222 \(192\.0\.2\.1\) '
                     r'is not an address of this machine.*'
                     r'--listen_all_interfaces'):
    listen.local_ip('192.0.2.1', 2222)  # TEST-NET-1: never local.
  with pytest.raises(UsageError, match="cannot resolve 'no-such-host.invalid'"):
    listen.local_ip('no-such-host.invalid', 2222)


def test_confined_environment_preloads_the_shim_once():
  cluster = _cluster({'worker': ['127.0.0.1:2222', '127.0.0.1:2223']},
                     index=1)
  env = listen.confined_environment(cluster, {'LD_PRELOAD': 'libother.so',
                                              'PATH': '/bin'})
  shim, other = env['LD_PRELOAD'].split()
  assert os.path.isfile(shim) and other == 'libother.so'
  assert (env[listen.HOST_ENV], env[listen.PORT_ENV]) == ('127.0.0.1', '2223')
  assert env['PATH'] == '/bin'
  assert listen.confined_environment(cluster, env) is None
  # The same environment does not confine another task's server.
  other_task = _cluster({'worker': ['127.0.0.1:2222', '127.0.0.1:2223']})
  assert listen.confined_environment(other_task, env)[listen.PORT_ENV] == (
      '2222')
  evaluator = _cluster({'worker': ['127.0.0.1:2222'],
                        'evaluator': ['127.0.0.1:2224']}, 'evaluator')
  assert listen.confined_environment(evaluator, {}) is None


@pytest.mark.parametrize('flags, expected', [
    ([], ['0000000000000000FFFF00000100007F']),  # ::ffff:127.0.0.1
    # What TensorFlow does on its own: [::], every interface.
    (['--listen_all_interfaces'], [_WILDCARDS[1]]),
])
def test_cli_task_server_listens_where_told(tmp_path, mnist_small_dir, flags,
                                            expected):
  port = _free_port()
  env = dict(os.environ, TF_CONFIG=json.dumps(
      {'cluster': {'worker': [f'127.0.0.1:{port}']},
       'task': {'type': 'worker', 'index': 0}}))
  for name in (listen.HOST_ENV, listen.PORT_ENV, 'LD_PRELOAD'):
    env.pop(name, None)
  proc = subprocess.Popen(
      [sys.executable, '-m', 'estimator_trainer.run',
       f'--model_dir={tmp_path}/model', '--dataset=mnist',
       f'--idx_dir={mnist_small_dir}', '--strategy=multi_worker_mirrored',
       '--train_steps=100000', *flags],
      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  try:
    deadline = time.monotonic() + 120
    while not _listening_addresses(port) and proc.poll() is None:
      assert time.monotonic() < deadline, 'the server never listened'
      time.sleep(0.2)
    assert _listening_addresses(port) == expected
  finally:
    proc.kill()
    _, stderr = proc.communicate()
  assert proc.returncode == -9, stderr[-3000:]


_SERVER = '''
import json, os, time
import tensorflow as tf
tf_config = json.loads(os.environ['TF_CONFIG'])
server = tf.distribute.Server(tf.train.ClusterSpec(tf_config['cluster']),
                              job_name='worker', task_index=0)
print('started', flush=True)
time.sleep(600)
'''


def test_listen_command_confines_any_command(tmp_path):
  """`python -m estimator_trainer.listen CMD`: a server CMD starts itself
  (as a TFX trainer would, through the Python API) is confined too."""
  port = _free_port()
  env = dict(os.environ, TF_CONFIG=json.dumps(
      {'cluster': {'worker': [f'127.0.0.1:{port}']},
       'task': {'type': 'worker', 'index': 0}}))
  proc = subprocess.Popen(
      [sys.executable, '-m', 'estimator_trainer.listen', sys.executable, '-c',
       _SERVER], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
      text=True)
  try:
    assert proc.stdout.readline() == 'started\n'
    assert _listening_addresses(port) == ['0000000000000000FFFF00000100007F']
  finally:
    proc.kill()
    proc.wait()


@pytest.mark.parametrize('argv, code, message', [
    (['estimator_trainer.listen'], 2, 'runs COMMAND'),
    (['estimator_trainer.listen', 'no-such-command-here'], 2,
     'error: command not found: no-such-command-here'),
])
def test_listen_command_errors(argv, code, message):
  env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
  result = subprocess.run([sys.executable, '-m', *argv], env=env,
                          capture_output=True, text=True, check=False)
  assert result.returncode == code
  assert message in result.stdout + result.stderr
  assert 'Traceback' not in result.stderr


def test_warns_when_unconfined(monkeypatch, caplog):
  cluster = _cluster({'worker': ['127.0.0.1:2222']})
  caplog.set_level(logging.WARNING, logger=listen.__name__)
  for name in (listen.HOST_ENV, listen.PORT_ENV, 'LD_PRELOAD'):
    monkeypatch.delenv(name, raising=False)
  listen.warn_if_unconfined(cluster)
  assert len(caplog.messages) == 1
  assert 'port 2222 of every interface' in caplog.messages[0]
  monkeypatch.setenv('LD_PRELOAD', listen._shim_path())
  monkeypatch.setenv(listen.PORT_ENV, '2222')
  listen.warn_if_unconfined(cluster)
  listen.warn_if_unconfined(None)
  assert len(caplog.messages) == 1
