"""model_dir as TensorBoard shows it: a real `tensorboard` server over two
short runs, queried through its HTTP API."""

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import types
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
from estimator_trainer import hparams
from estimator_trainer import stack
from estimator_trainer import summaries
from estimator_trainer.config import TrainConfig
import builders

# In one pytest-xdist worker: the runs and the server they share are made once.
pytestmark = pytest.mark.xdist_group('tensorboard')

_RUNS = {'lr_1e-3': {'learning_rate': 0.001, 'train_steps': 60},
         'lr_3e-3': {'learning_rate': 0.003, 'train_steps': 30}}
# A small MLP: what TensorBoard shows of a run is the model's whatever it
# is, and the CNN's convolutions made most of the three evaluations.
_FLAGS = {'dataset': 'mnist', 'model': builders.mlp,
          'save_checkpoints_steps': 30, 'save_summary_steps': 10,
          'log_step_count_steps': 10, 'throttle_secs': 0, 'export': 'none'}


@pytest.fixture(scope='module')
def logdir(tmp_path_factory, mnist_small_dir):
  """Two short runs under one parent directory, as users compare runs, in
  this process: the same event files as the command's, without a process's
  start (the command's console test_run's console tests check)."""
  parent = tmp_path_factory.mktemp('runs')
  progress = _Lines()
  logger = logging.getLogger('estimator_trainer.progress')
  level = logger.level
  logger.setLevel(logging.INFO)
  logger.addHandler(progress)
  try:
    for name, flags in _RUNS.items():
      config = TrainConfig(model_dir=str(parent / name),
                           idx_dir=str(mnist_small_dir), **_FLAGS, **flags)
      engines.ENGINES[config.engine].run(config)
  finally:
    logger.removeHandler(progress)
    logger.setLevel(level)
  # Not a terminal: plain progress lines, each run's ending at its last step.
  for flags in _RUNS.values():
    steps = flags['train_steps']
    assert any(line.startswith(f'step {steps}/{steps} (100%) '
                               'train loss (label-smoothed) ')
               for line in progress.lines), progress.lines
  return parent


class _Lines(logging.Handler):
  """The messages logged to the logger it is added to."""

  def __init__(self):
    super().__init__(logging.INFO)
    self.lines = []

  def emit(self, record):
    self.lines.append(record.getMessage())


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _tensorboard(directory):
  port = _free_port()
  return _serving(
      [sys.executable, '-m', 'tensorboard.main', f'--logdir={directory}',
       '--host=127.0.0.1', f'--port={port}', '--reload_interval=0'], port)


@contextlib.contextmanager
def _serving(argv, port):
  """The URL of the server `argv` starts on `port`, once it answers
  /data/runs; the server stopped at the end."""
  server = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
  url = f'http://127.0.0.1:{port}'
  try:
    deadline = time.monotonic() + 120
    while True:
      assert server.poll() is None, server.stderr.read()
      try:
        urllib.request.urlopen(f'{url}/data/runs', timeout=5)
        break
      except OSError:
        assert time.monotonic() < deadline, 'the server did not start'
        time.sleep(0.5)
    yield url
  finally:
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope='module')
def tensorboard(logdir):
  with _tensorboard(logdir) as url:
    yield url


def _get(url):
  with urllib.request.urlopen(url, timeout=60) as response:
    return response.read()


def _post(url, body):
  request = urllib.request.Request(
      url, data=json.dumps(body).encode(),
      headers={'Content-Type': 'application/json'})
  with urllib.request.urlopen(request, timeout=60) as response:
    return json.loads(response.read())


@pytest.mark.slow
def test_scalars_of_training_and_evaluation_are_served(tensorboard):
  tags = json.loads(_get(f'{tensorboard}/data/plugin/scalars/tags'))
  for run in _RUNS:
    assert {'loss', 'accuracy', 'learning_rate', 'global_step/sec',
            'examples_per_second', 'examples_per_second_per_replica'
            } <= set(tags[run])
    assert {'loss', 'accuracy', 'average_loss'} <= set(tags[f'{run}/eval'])
  points = json.loads(_get(f'{tensorboard}/data/plugin/scalars/scalars?'
                           'run=lr_1e-3/eval&tag=accuracy'))
  assert [step for _, step, _ in points] == [30, 60]


@pytest.mark.slow
@pytest.mark.parametrize('tag, size', [('confusion_matrix/0', (650, 700)),
                                       ('misclassified/0', (1080, 720))])
def test_eval_images_are_served(tensorboard, tag, size):
  images = json.loads(_get(f'{tensorboard}/data/plugin/images/images?'
                           f'run=lr_1e-3/eval&tag={tag}'))
  assert [image['step'] for image in images] == [30, 60]
  png = _get(f'{tensorboard}/data/plugin/images/individualImage?'
             f'{images[-1]["query"]}')
  assert tf.image.decode_png(png).shape[:2] == size


@pytest.mark.slow
def test_hparams_table_compares_the_runs(tensorboard):
  experiment = _post(f'{tensorboard}/data/plugin/hparams/experiment',
                     {'experimentName': ''})
  assert {'engine', 'dataset', 'strategy', 'replicas', 'global_batch_size',
          'optimizer', 'learning_rate', 'train_steps', 'clip_global_norm',
          'accumulate_steps', 'ema_decay'} <= {
              info['name'] for info in experiment['hparamInfos']}
  groups = _session_groups(tensorboard)
  by_rate = {group['hparams']['learning_rate']: group for group in groups}
  assert set(by_rate) == {0.001, 0.003}
  for group in groups:
    # The stack's default: estimator on TensorFlow 2.15, ctl from 2.16 on.
    assert group['hparams']['engine'] == stack.default_engine()
    # The controls these runs leave off.
    assert (group['hparams']['clip_global_norm'],
            group['hparams']['accumulate_steps'],
            group['hparams']['ema_decay']) == (0, 1, 0)
    metrics = {(value['name']['group'], value['name']['tag']): value
               for value in group['sessions'][0]['metricValues']}
    # The final evaluation's accuracy, at the run's last step.
    accuracy = metrics[('eval', 'accuracy')]
    assert accuracy['trainingStep'] == group['hparams']['train_steps']
    assert 0.5 < accuracy['value'] <= 1
    # examples/s: the whole run's training rate, written at its last step,
    # not the last interval's examples_per_second.
    rate = metrics[('', summaries.RUN_RATE)]
    run = os.path.basename(group['hparams']['run'])
    (_, step, value), = json.loads(_get(
        f'{tensorboard}/data/plugin/scalars/scalars?run={run}'
        f'&tag={summaries.RUN_RATE}'))
    assert rate['trainingStep'] == step == group['hparams']['train_steps']
    assert rate['value'] == pytest.approx(value) and value > 0


def _session_groups(url):
  return _post(
      f'{url}/data/plugin/hparams/session_groups',
      {'experimentName': '', 'colParams': [], 'startIndex': 0,
       'sliceSize': 10, 'allowedStatuses': [
           'STATUS_UNKNOWN', 'STATUS_SUCCESS', 'STATUS_FAILURE',
           'STATUS_RUNNING']})['sessionGroups']


def test_the_hparams_table_shows_what_tells_two_structured_runs_apart(
    tmp_path):
  """Issue 75, item 4: the table showed accumulate_steps, clip_global_norm,
  dataset, ema_decay and engine (the first five by name: nothing said which
  differ), three of them constants of every run, and named its rows by hash
  ids. Two structured runs' HParams as the engines write them (no training:
  the events are the test)."""
  spec = types.SimpleNamespace(name='census', head='binary',
                               prior_weight_decay=1e-4)
  runs = {'linear': {'model': 'linear'},
          'dnn': {'model': 'dnn', 'learning_rate': 0.003}}
  for name, flags in runs.items():
    config = TrainConfig(model_dir=str(tmp_path / name), label_key='y',
                         train_files=str(tmp_path / 'train.csv'), **flags)
    values = hparams.run_hparams(config, spec, 1, 64, 2000)
    with tf.summary.create_file_writer(config.model_dir).as_default(step=0):
      for summary in hparams.hparams_summaries(
          values, hparams.compared(config, values)):
        tf.summary.experimental.write_raw_pb(summary)
  with _tensorboard(tmp_path) as url:
    experiment = _post(f'{url}/data/plugin/hparams/experiment',
                       {'experimentName': ''})
    groups = _session_groups(url)
  # TensorBoard's page ticks the first five columns, those that differ
  # first (tensorboard/webfiles.zip, index.js: _computeHParams).
  names = [info['name'] for info in experiment['hparamInfos']]
  assert names[:5] == ['dataset', 'learning_rate', 'model', 'run',
                       'train_steps']
  assert {'accumulate_steps', 'clip_global_norm', 'ema_decay'} <= set(
      names[5:])
  # A row per run, named by it.
  assert sorted(group['name'] for group in groups) == [
      f'dnn in {tmp_path}', f'linear in {tmp_path}']


# The test's own server handling, not TensorBoard's serving: a stand-in
# server that answers /data/runs, without TensorBoard's start (a TensorFlow
# import, ~3 CPU-seconds).
@pytest.mark.default_stack_only
def test_server_is_stopped_when_an_assertion_fails(tmp_path):
  (tmp_path / 'data').mkdir()
  (tmp_path / 'data' / 'runs').write_text('[]')
  port = _free_port()
  with pytest.raises(AssertionError):
    with _serving([sys.executable, '-m', 'http.server', '--bind', '127.0.0.1',
                   '--directory', str(tmp_path), str(port)], port) as url:
      server_url = url
      raise AssertionError('a failing check')
  with pytest.raises(OSError):
    urllib.request.urlopen(f'{server_url}/data/runs', timeout=5)


def test_confusion_matrix_sums_replicas_and_renders():
  metric = summaries.ConfusionMatrixImage(class_names=list('abc'))
  metric.update_state(tf.constant([0, 1, 2, 2]), tf.constant([0, 2, 2, 1]),
                      tf.constant([1., 1., 1., 0.]))
  np.testing.assert_array_equal(
      metric.weights[0].numpy(), [[1, 0, 0], [0, 0, 1], [0, 0, 1]])
  summary = tf.compat.v1.Summary.FromString(metric.result().numpy())
  assert summary.value[0].tag == 'confusion_matrix'
  assert summary.value[0].image.encoded_image_string.startswith(b'\x89PNG')


def test_misclassified_keeps_the_first_wrong_images_with_labels():
  metric = summaries.MisclassifiedImage(class_names=list('abcd'),
                                        image_shape=(28, 28, 1), max_images=3)
  images = tf.reshape(tf.range(5, dtype=tf.float32), [5, 1, 1, 1]) * tf.ones(
      [5, 28, 28, 1])
  # Wrong: examples 1, 3 (example 4 is wrong but weight 0: padding).
  metric.update_state(images, tf.constant([0, 1, 2, 3, 0], tf.int64),
                      tf.constant([0, 2, 2, 0, 1], tf.int64),
                      tf.constant([1., 1., 1., 1., 0.]))
  metric.update_state(images + 10, tf.constant([1, 1, 1, 1, 1], tf.int64),
                      tf.constant([3, 3, 1, 1, 1], tf.int64),
                      tf.ones([5]))
  stored_images, labels, predictions, count = metric.weights
  assert count.numpy() == 3
  np.testing.assert_array_equal(stored_images.numpy()[:, 0, 0, 0],
                                [1, 3, 10])
  np.testing.assert_array_equal(labels.numpy(), [1, 3, 1])
  np.testing.assert_array_equal(predictions.numpy(), [2, 0, 3])
  summary = tf.compat.v1.Summary.FromString(metric.result().numpy())
  assert summary.value[0].image.encoded_image_string.startswith(b'\x89PNG')
