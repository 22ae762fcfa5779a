"""What a run is called where users look it up (issue 47, items 2 and 3):
its model_dir's record names the data it trained on, and TensorBoard's
HParams tab keeps every run its own row, named by its data, head and model."""

import json

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import plugin_data_pb2

from estimator_trainer import engines
from estimator_trainer.config import TrainConfig


def _write_table(directory, seed, regression):
  """train.csv and eval.csv of a label y on x: classes or a number."""
  rng = np.random.default_rng(seed)
  for part, rows in (('train', 40), ('eval', 10)):
    x = rng.normal(size=rows)
    y = [f'{v * 100:.2f}' if regression else str(int(v > 0)) for v in x]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f'{part}.csv').write_text(
        'x,y\n' + ''.join(f'{a:.4f},{b}\n' for a, b in zip(x, y)))
  return directory


def _train(data, model_dir):
  engines.ENGINES['ctl'].run(TrainConfig(
      model_dir=str(model_dir), engine='ctl', label_key='y',
      train_files=str(data / 'train.csv'), eval_files=str(data / 'eval.csv'),
      train_steps=2, save_summary_steps=1, export='none'))


def _hparams(model_dir):
  """The hparams the run's training events record."""
  for path in tf.io.gfile.glob(str(model_dir / 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name != 'hparams':
          continue
        data = plugin_data_pb2.HParamsPluginData.FromString(
            value.metadata.plugin_data.content)
        if data.HasField('session_start_info'):
          return {name: getattr(hparam, hparam.WhichOneof('kind'))
                  for name, hparam in data.session_start_info.hparams.items()}
  raise AssertionError(f'no hparams in {model_dir}')


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Two CSV runs under one logdir, a classifier's and a regression's, with
  the same flags: name -> (its data directory, its model_dir)."""
  root = tmp_path_factory.mktemp('names')
  result = {}
  for name, regression in (('classes', False), ('numbers', True)):
    data = _write_table(root / f'{name}_data', 0, regression)
    _train(data, root / 'logdir' / name)
    result[name] = data, root / 'logdir' / name
  return result


def test_the_record_names_the_files_and_no_image_dataset(runs):
  data, model_dir = runs['classes']
  record = json.loads((model_dir / 'model.json').read_text())
  # An inferred spec names nothing: the training files name the data.
  assert record['dataset'] == str(data / 'train.csv')
  assert record['head'] == 'binary'
  # The run read no image setting: none is recorded (--dataset's default,
  # fashion_mnist, was).
  assert not {'dataset', 'image_key', 'image_shape', 'num_classes',
              'idx_dir', 'augment'} & set(record['run'])
  assert record['run']['train_files'] == str(data / 'train.csv')


def test_hparams_keep_runs_on_different_data_apart(runs):
  (classes_data, classes), (numbers_data, numbers) = (runs['classes'],
                                                      runs['numbers'])
  first, second = _hparams(classes), _hparams(numbers)
  assert (first['dataset'], first['head'], first['model']) == (
      str(classes_data / 'train.csv'), 'binary', 'linear')
  assert (second['dataset'], second['head']) == (
      str(numbers_data / 'train.csv'), 'regression')
  assert first['run'] == str(classes) and second['run'] == str(numbers)
