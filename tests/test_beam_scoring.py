"""Batch scoring on Beam (tabular/beam_scoring.py, issue 74, item 3): the
parts that need no model; its answers against --mode=predict on trained
models are test_tabular_runs.py's (its shared runs)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import sources
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.tabular import parsing
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.spec import Column, FeatureSpec
import tabular_sets

# Beam's and tfx-bsl's: the `beam` extra, on the TensorFlow 2.15 stack.
pytest.importorskip('tfx_bsl')
from estimator_trainer.tabular import beam_scoring  # pylint: disable=g-import-not-at-top,wrong-import-position
from estimator_trainer.tabular import scoring_transforms  # pylint: disable=g-import-not-at-top,wrong-import-position

SPEC = FeatureSpec((Column('x', 'float_normalized'),
                    Column('n', 'integer_categorical'),
                    Column('s', 'string_categorical')), 'y', head='binary')
# Missing cells (an empty x, NA in n, an empty s), an empty line, CRLF, a
# quoted field; the label present or not.
CSV = ('id,x,n,s,y\r\n'
       'a,1.5,3,red,1\r\n'
       'b,,NA,,0\r\n'
       '\r\n'
       'c,-2e3,7,"blue, dark",1\r\n')


def _examples(path, key_column=None, spec=SPEC, unreadable=False):
  keyed = scoring_transforms.KeyedExamples(spec, key_column, unreadable)
  return list(keyed.process(str(path)))


def _features(records):
  """The features of serialized tf.Examples `records` as serving parses
  them (numpy)."""
  return {name: values.numpy() for name, values in
          parsing.parse_examples(SPEC, records).items()}


def test_a_csv_row_is_the_example_training_parses(tmp_path):
  """Each row's tf.Example holds its features as training's parse reads
  the same lines (a missing cell its default: NaN, the int64 sentinel,
  ''), keyed by file and line (the header line 1; the empty line is no
  record but counts)."""
  path = tmp_path / 'new.csv'
  path.write_bytes(CSV.encode())
  keyed = _examples(path)
  assert [key for key, _ in keyed] == [(('file', str(path)), ('line', line))
                                       for line in (2, 3, 5)]
  source = TabularSource({sources.TRAIN: str(path), sources.TEST: str(path)},
                         SPEC)
  raw, _, _ = source.parse(tf.constant([line for line in CSV.split('\r\n')
                                        [1:] if line]))
  examples = _features([record for _, record in keyed])
  for name, values in raw.items():
    np.testing.assert_array_equal(examples[name], values.numpy(),
                                  err_msg=name)
  assert examples['s'].tolist() == [b'red', b'', b'blue, dark']
  assert np.isnan(examples['x'][1])


def test_a_key_column_keys_the_rows_and_needs_no_label(tmp_path):
  path = tmp_path / 'new.csv'
  path.write_text('x,s,n,id\n1,a,2,k1\n2,b,3,k2\n')  # Another order.
  assert [key for key, _ in _examples(path, 'id')] == [
      (('file', str(path)), ('line', 2), ('id', 'k1')),
      (('file', str(path)), ('line', 3), ('id', 'k2'))]
  path.write_text('x,s,n,id\n1,a,2,k1\n2,b,3,\n')
  with pytest.raises(DataError) as raised:
    _examples(path, 'id')
  assert str(raised.value) == (f"{path} line 3, column 'id': no value (an "
                               'empty cell); each row needs its key')
  with pytest.raises(DataError) as raised:
    _examples(path, 'key')
  assert str(raised.value).startswith(
      f"{path}: no column 'key' (--key_column names it); its columns: ")


def test_a_bad_cell_is_one_line_naming_it(tmp_path):
  """As training's check names it (the graph's parse said
  'StringToNumberOp could not correctly convert string: abc');
  --unreadable_as_missing reads it as missing."""
  path = tmp_path / 'new.csv'
  lines = ['x,n,s'] + [f'{i}.5,{i},a' for i in range(2000)]
  lines[1500] = '1.5,abc,a'
  path.write_text('\n'.join(lines) + '\n')
  with pytest.raises(DataError) as raised:
    _examples(path)
  assert str(raised.value) == (
      f"{path} line 1501, column 'n': 'abc' is not an integer "
      '(--unreadable_as_missing reads such cells as missing)')
  examples = _examples(path, unreadable=True)
  assert _features([examples[1499][1]])['n'].tolist() == [
      parsing.feature_default(SPEC.data_columns[1])]
  path.write_text('x,n,s\n1,2\n')
  with pytest.raises(DataError) as raised:
    _examples(path)
  assert str(raised.value) == f"{path} line 2: 2 fields, but its header has 3"


def test_tfrecords_pass_as_they_are_keyed_by_record(tmp_path):
  path = tmp_path / 'new.tfrecord'
  records = tabular_sets.examples({'x': np.array([1.0, 2.0], np.float32),
                                   'id': np.array([7, 9])})
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  assert _examples(path) == [((('file', str(path)), ('record', 1)), records[0]),
                             ((('file', str(path)), ('record', 2)), records[1])]
  assert [key[-1] for key, _ in _examples(path, 'id')] == [('id', 7),
                                                           ('id', 9)]
  with pytest.raises(DataError) as raised:
    _examples(path, 'x2')
  assert str(raised.value) == (f"{path} record 1: feature 'x2' (the "
                               '--key_column) needs one value, has none')
  with tf.io.TFRecordWriter(str(path)) as writer:  # A feature of no list.
    writer.write(tf.train.Example(features={'feature': {
        'id': tf.train.Feature()}}).SerializeToString())
  with pytest.raises(DataError) as raised:
    _examples(path, 'id')
  assert str(raised.value) == (f"{path} record 1: feature 'id' (the "
                               '--key_column) needs one value, has none')
  with tf.io.TFRecordWriter(str(path)) as writer:
    writer.write(b'\x01not an example')
  with pytest.raises(DataError) as raised:
    _examples(path)
  assert str(raised.value).startswith(f'{path} record 1: not a tf.Example')


def test_a_prediction_line_is_predictions_jsonl_s():
  """The row's place and key and each output as --mode=predict writes
  them, by name."""
  from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=g-import-not-at-top
  log = prediction_log_pb2.PredictionLog()
  outputs = log.predict_log.response.outputs
  for name, value in (('probabilities', np.array([[0.25, 0.7500004]],
                                                 np.float32)),
                      ('class_ids', np.array([[1]])),
                      ('all_class_ids', np.array([[0, 1]], np.int32)),
                      ('classes', np.array([[b'yes']]))):
    # As tfx-bsl writes a row's (packed bytes or a list of values).
    outputs[name].CopyFrom(tf.make_tensor_proto(value))
  outputs['logits'].CopyFrom(tf.make_tensor_proto(1.5, shape=[1, 2]))
  key = (('file', 'f.csv'), ('line', 2), ('id', 'a7'))
  line = scoring_transforms.prediction_line((key, log))
  assert json.loads(line) == {
      'file': 'f.csv', 'line': 2, 'id': 'a7', 'class_ids': [1],
      'all_class_ids': [0, 1], 'classes': ['yes'], 'logits': [1.5, 1.5],
      'probabilities': [0.25, 0.75]}
  assert list(json.loads(line)) == sorted(json.loads(line))  # As predict's.


def test_the_newest_export_is_scored_unless_one_is_given(tmp_path):
  model_dir = str(tmp_path)
  with pytest.raises(UsageError) as raised:
    beam_scoring.newest_export(model_dir)
  assert str(raised.value) == (
      f'{model_dir} holds no export (export/*/<timestamp>): train with '
      '--export=final, run --mode=export on it, or give --saved_model')
  for exporter, stamp in (('final', '1700000002'), ('best', '1700000010'),
                          ('best', 'temp-local-1'), ('latest', '999')):
    os.makedirs(os.path.join(layout.export_dir(model_dir, exporter), stamp))
  assert beam_scoring.newest_export(model_dir) == os.path.join(
      layout.export_dir(model_dir, 'best'), '1700000010')


def test_a_model_dir_without_a_feature_spec_is_refused(tmp_path):
  with pytest.raises(UsageError) as raised:
    beam_scoring.run([f'--model_dir={tmp_path}', '--input=x.csv',
                      f'--output={tmp_path}/out'])
  assert str(raised.value) == (
      f'{tmp_path} holds no feature spec '
      f'({layout.feature_spec_file(str(tmp_path))}): not a model_dir of '
      'structured data that trained')


def test_a_saved_model_that_cannot_score_is_refused(tmp_path):
  """Before any pipeline runs: no SavedModel there, or one without a
  predict signature of serialized tf.Examples (an image model's)."""
  spec_file = layout.feature_spec_file(str(tmp_path))
  os.makedirs(os.path.dirname(spec_file))
  with open(spec_file, 'w') as f:
    f.write(spec_lib.to_json(SPEC))
  argv = [f'--model_dir={tmp_path}', '--input=x.csv',
          f'--output={tmp_path}/out']
  with pytest.raises(UsageError) as raised:
    beam_scoring.run([*argv, f'--saved_model={tmp_path}/none'])
  assert str(raised.value).startswith(
      f"--saved_model={tmp_path}/none: no 'predict' signature of serialized "
      'tf.Examples to score with (')
  module = tf.Module()
  module.f = tf.function(lambda x: {'y': 2 * x},
                         input_signature=[tf.TensorSpec([None], tf.float32)])
  tf.saved_model.save(module, str(tmp_path / 'floats'),
                      signatures={'predict': module.f})
  with pytest.raises(UsageError) as raised:
    beam_scoring.run([*argv, f'--saved_model={tmp_path}/floats'])
  assert str(raised.value) == (
      f"--saved_model={tmp_path}/floats: no 'predict' signature of serialized "
      'tf.Examples to score with (Input dtype is expected to be 7, got 1)')
  # A --key_column that a line has as a field already: the place's, or a
  # prediction's.
  for name in ('line', 'y'):
    with pytest.raises(UsageError) as raised:
      beam_scoring._check_key(name, str(tmp_path / 'floats'))  # pylint: disable=protected-access
    assert str(raised.value) == (
        f"--key_column={name}: each line has a field of that name already "
        "(the row's place: file, line, record; the predictions: y)")
  beam_scoring._check_key('id', str(tmp_path / 'floats'))  # pylint: disable=protected-access


def test_a_batch_is_at_most_1024_rows(tmp_path):
  """Beam's BatchElements grew batches to 10,000 rows on a long job: 0.2
  GB more peak RSS than batches of 500 (a batch's prediction logs)."""
  module = tf.Module()
  module.f = tf.function(lambda x: {'y': tf.strings.length(x)},
                         input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path), signatures={'predict': module.f})
  handler = scoring_transforms.model_handler(str(tmp_path))
  assert handler.batch_elements_kwargs() == {'max_batch_size': 1024}
