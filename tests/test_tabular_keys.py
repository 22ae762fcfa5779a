"""Predictions a pipeline can join to its rows (issue 74, items 1 and 2): a
key column (--key_column) forwarded to predictions.jsonl and to the
exports' predict signatures, as canned Estimators' forward_features does;
each prediction's file and line (CSV) or record (TFRecords); and
--mode=predict on new files with the model_dir alone."""

import csv
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.tools import saved_model_utils

from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
import cli_config
import engine_params
from tabular_sets import examples

ROWS = 160
# Small and unshuffled: the property is where each row's key goes, not the
# fit.
TRAINING = ['--label_key=y', '--key_column=id', '--train_steps=5',
            '--global_batch_size=16', '--shuffle_buffer=0']


def _table(rows=ROWS, seed=0):
  rng = np.random.default_rng(seed)
  a = rng.uniform(0, 1, rows).round(4)
  b = rng.choice(['p', 'q', 'r'], rows)
  return {'id': np.array([f'r{i:04d}' for i in range(rows)]), 'a': a,
          'b': b, 'y': ((a + (b == 'p') * 0.5) > 0.7).astype(np.int64)}


def _write_csv(path, table, names):
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(names)
    writer.writerows(zip(*(table[name].tolist() for name in names)))
  return str(path)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('keyed')
  return directory, _write_csv(directory / 'train.csv', _table(),
                               ['id', 'a', 'b', 'y'])


@pytest.fixture(scope='module')
def trained(data):
  """trained(engine) -> the model_dir of a run keyed by `id` (the CSV
  training file, 20 % held out), trained once."""
  directory, train = data
  done = {}

  def train_with(engine):
    if engine not in done:
      model_dir = directory / f'model_{engine}'
      cli_config.run_in_process([f'--model_dir={model_dir}',
                                 f'--train_files={train}',
                                 f'--engine={engine}', *TRAINING])
      done[engine] = model_dir
    return done[engine]
  return train_with


def _predict(model_dir, *flags):
  """--mode=predict's lines, of its command line `flags`."""
  path = pathlib.Path(model_dir) / 'out.jsonl'
  cli_config.run_in_process([f'--model_dir={model_dir}', '--mode=predict',
                             f'--predictions_file={path}', *flags])
  return [json.loads(line) for line in path.read_text().splitlines()]


def _signatures(model_dir):
  export = next((pathlib.Path(model_dir) / 'export' / 'final').iterdir())
  return export, saved_model_utils.get_meta_graph_def(str(export),
                                                      'serve').signature_def


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.engines_with(
    both_stacks=('ctl',)))
def test_a_key_survives_to_the_predictions_and_the_predict_signatures(
    trained, data, engine):
  model_dir = trained(engine)
  lines = _predict(model_dir, f'--num_predictions={ROWS}')
  # The held-out rows, each named by its key and its place: the CSV read
  # here says which row each line is.
  rows = pathlib.Path(data[1]).read_text().splitlines()
  held_out = json.loads((model_dir / 'metrics.json').read_text())
  assert len(lines) == held_out['num_examples'] > 0
  for line in lines:
    assert line['file'] == data[1]
    assert rows[line['line'] - 1].split(',')[0] == line['id'], line
  export, signatures = _signatures(model_dir)
  for name, signature in signatures.items():
    if name == '__saved_model_init_op':  # TF2's table initialisers.
      continue
    # Canned's forward_features: the predict-method signatures carry the
    # key; TensorFlow Serving's Classify takes one or two outputs, Regress
    # one, so those carry what canned's do.
    if signature.method_name.endswith('/predict'):
      assert 'id' in signature.outputs, name
    else:
      assert set(signature.outputs) in ({'classes', 'scores'},
                                        {'outputs'}), name
  assert {'predict', 'raw:predict'} <= set(signatures)
  served = tf.saved_model.load(str(export)).signatures
  ids = [line['id'] for line in lines[:5]]
  table = {name: values[[int(i[1:]) for i in ids]]
           for name, values in _table().items()}
  out = served['predict'](examples=tf.constant(examples(table)))
  assert [v.decode() for v in out['id'].numpy()] == ids
  np.testing.assert_allclose(
      out['probabilities'].numpy(),
      [line['probabilities'] for line in lines[:5]], atol=1e-5)
  raw = served['raw:predict'](
      a=tf.constant(table['a'], tf.float32), b=tf.constant(table['b']),
      id=tf.constant(table['id']))
  assert [v.decode() for v in raw['id'].numpy()] == ids
  # Without the key, predict serves an empty one; classify never reads it
  # (here an int64 where the export's is a string).
  unkeyed = {name: values for name, values in table.items() if name != 'id'}
  out = served['predict'](examples=tf.constant(examples(unkeyed)))
  assert out['id'].numpy().tolist() == [b''] * len(ids)
  classified = served['classification'](inputs=tf.constant(examples(
      dict(table, id=np.arange(len(ids))))))
  np.testing.assert_allclose(
      classified['scores'].numpy(),
      [line['probabilities'] for line in lines[:5]], atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_new_files_predict_with_the_model_dir_alone(trained, data, engine,
                                                    tmp_path):
  """CSV without the label and TFRecords (with it; an int64 key) give the
  run's own predictions of the same rows, with its training file gone."""
  model_dir = trained(engine)
  own = {line['id']: line for line in _predict(model_dir,
                                               f'--num_predictions={ROWS}')}
  picked = [int(key[1:]) for key in sorted(own)]
  table = {name: values[picked] for name, values in _table().items()}
  new_csv = _write_csv(tmp_path / 'new.csv', table, ['b', 'id', 'a'])
  numbered = dict(table, id=np.array(picked, np.int64))
  records = tmp_path / 'new.tfrecord'
  with tf.io.TFRecordWriter(str(records)) as writer:
    for record in examples(numbered):
      writer.write(record)
  train = pathlib.Path(data[1])
  train.rename(tmp_path / 'away.csv')
  try:
    from_csv = _predict(model_dir, f'--predict_files={new_csv}')
    from_records = _predict(model_dir, f'--predict_files={records}')
  finally:
    (tmp_path / 'away.csv').rename(train)
  assert len(from_csv) == len(from_records) == len(own)  # Every row.
  for number, (line, record) in enumerate(zip(from_csv, from_records)):
    expected = own[line['id']]
    assert (line['file'], line['line']) == (new_csv, number + 2)
    assert (record['file'], record['record'], record['id']) == (
        str(records), number + 1, picked[number])
    for got in (line, record):
      np.testing.assert_allclose(got['probabilities'],
                                 expected['probabilities'], atol=1e-6)
      assert got['classes'] == expected['classes']


@pytest.mark.slow
def test_bad_predict_files_and_a_missing_key_are_one_line(trained, tmp_path,
                                                          capfd):
  model_dir = trained('ctl')
  unkeyed = tmp_path / 'unkeyed.csv'
  unkeyed.write_text('a,b\n0.5,p\n')
  for flags, message in (
      ([f'--predict_files={tmp_path}/none*.csv'],
       f'error: --predict_files={tmp_path}/none*.csv: no files match'),
      ([f'--predict_files={unkeyed}'],
       f"error: {unkeyed}: no column 'id' (--key_column; --key_column= "
       'predicts without one); its columns: a, b')):
    code, err = cli_config.main_in_process(
        [f'--model_dir={model_dir}', '--mode=predict', *flags], capfd)
    assert (code, err.strip().splitlines()[-1]) == (2, message)


@pytest.mark.parametrize('values, message', [
    (dict(predict_files='new.csv'), '--predict_files is for structured'),
    (dict(predict_files='new.csv', train_files='a.csv'),
     '--predict_files is for --mode=predict'),
    (dict(key_column='id'), '--key_column is for structured'),
])
def test_the_flags_are_checked_up_front(values, message):
  with pytest.raises(UsageError, match=message):
    TrainConfig(model_dir='/tmp/x', **values)



def test_predictions_are_written_as_they_come_and_never_in_part(tmp_path):
  """write_predictions streams its lines into the temporary file (so that
  every record of --predict_files needs no list of them in memory), and a
  failure on the way leaves neither a part nor the temporary file."""
  from estimator_trainer import outputs  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'p.jsonl'
  seen = []

  def predictions(fail_at=None):
    for i in range(3):
      if i == fail_at:
        raise ValueError('bad row')
      # Asked for while the temporary file is open, not all before it.
      seen.append(bool(list(tmp_path.glob('p.jsonl.tmp-*'))))
      yield {'predictions': np.array([i / 3], np.float32),
             'file': b'a.csv', 'line': i + 2}
  assert outputs.write_predictions(str(path), predictions()) == 3
  assert seen == [True] * 3
  assert [json.loads(line) for line in path.read_text().splitlines()][1] == {
      'index': 1, 'file': 'a.csv', 'line': 3, 'predictions': [0.333333]}
  with pytest.raises(ValueError, match='bad row'):
    outputs.write_predictions(str(path), predictions(fail_at=2))
  assert len(path.read_text().splitlines()) == 3  # The earlier file, whole.
  assert sorted(p.name for p in tmp_path.iterdir()) == ['p.jsonl']
