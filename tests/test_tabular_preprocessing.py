"""Tabular preprocessing: statistics, the Keras-layer encoder and the
input_fn, on scikit-learn's bundled datasets written to CSV, inside
tf.estimator (a v1 graph), in TF2 eager and under MirroredStrategy."""

import csv
import dataclasses
import json
import logging
import os
import re
import shutil
import threading

import numpy as np
import pytest
import tensorflow as tf
from sklearn import datasets

from estimator_trainer import layout
from estimator_trainer import models as models_lib
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.data import ModeKeys
from estimator_trainer.errors import DataError, TrainerError, UsageError
from estimator_trainer.models import PADDING
from estimator_trainer.models import WEIGHT
from estimator_trainer.strategy import make_strategy
from estimator_trainer.models import tabular as tabular_models
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import statistics as stats_lib
from estimator_trainer.tabular import warm_start
from estimator_trainer.tabular.encoder import (OOV_INDICES, EncodedInput,
                                               Encoder)
from estimator_trainer.tabular.input import make_input_fn
from estimator_trainer.tabular.source import TabularSource as Source
from estimator_trainer.tabular.spec import Column, Cross, FeatureSpec

TRAIN, TEST = sources.TRAIN, sources.TEST
ID = 'row'  # A raw float column of each row's index: which example is which.


# --- Real small data --------------------------------------------------------


def _write_csv(path, table, rows):
  names = list(table)
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(names)
    for i in rows:
      writer.writerow(['' if table[n][i] is None else table[n][i]
                       for n in names])
  return str(path)


def _bands(values, names):
  """Each value's tercile's name: a real string column."""
  edges = np.quantile(values, [1 / 3, 2 / 3])
  return [names[int(np.searchsorted(edges, v))] for v in values]


def _breast_cancer(directory):
  """Binary, string labels, a weight column, a string categorical with
  missing cells: 569 rows, train 400 (2 files), test 169."""
  bunch = datasets.load_breast_cancer()
  x, y = bunch.data, bunch.target
  names = list(bunch.feature_names)
  size = _bands(x[:, names.index('mean area')], ['small', 'medium', 'large'])
  texture = _bands(x[:, names.index('mean texture')],
                   ['smooth', 'rough', 'coarse'])
  table = {
      ID: [float(i) for i in range(len(y))],
      'mean_radius': x[:, names.index('mean radius')],
      'mean_texture': x[:, names.index('mean texture')],
      'worst_concavity': x[:, names.index('worst concavity')],
      'size': [None if i % 17 == 0 else s for i, s in enumerate(size)],
      'texture': texture,
      'diagnosis': [bunch.target_names[t] for t in y],
      'w': [2.0 if t == 0 else 1.0 for t in y],
  }
  spec = FeatureSpec(
      columns=(Column(ID, 'float'), Column('mean_radius', 'float_normalized'),
               Column('mean_texture', 'float_discretized', num_bins=4),
               Column('worst_concavity', 'float_normalized'),
               Column('size', 'string_categorical', embedding_dim=2),
               Column('texture', 'string_hashed', num_bins=4)),
      crosses=(Cross(('size', 'texture'), num_bins=16),),
      label='diagnosis', label_vocabulary=tuple(bunch.target_names),
      weight='w', head='binary', name='breast_cancer')
  train = [_write_csv(directory / f'train-{i}.csv', table, rows)
           for i, rows in enumerate((range(0, 200), range(200, 400)))]
  test = _write_csv(directory / 'test.csv', table, range(400, len(y)))
  return Source({TRAIN: ','.join(train), TEST: test}, spec)


def _wine(directory):
  """Multiclass, integer labels 0..2, hashed and integer categorical columns
  and their cross: 178 rows, train 120, test 58."""
  bunch = datasets.load_wine()
  x, y = bunch.data, bunch.target
  names = list(bunch.feature_names)
  order = np.random.default_rng(0).permutation(len(y))  # Sorted by class.
  table = {
      ID: [float(i) for i in range(len(y))],
      'alcohol': x[:, names.index('alcohol')],
      'flavanoids': x[:, names.index('flavanoids')],
      'color_intensity': x[:, names.index('color_intensity')],
      'magnesium': x[:, names.index('magnesium')].astype(int),
      'ash_band': (x[:, names.index('ash')] * 2).astype(int),
      'class': y,
  }
  spec = FeatureSpec(
      columns=(Column(ID, 'float'), Column('alcohol', 'float_normalized'),
               Column('flavanoids', 'float_normalized'),
               Column('color_intensity', 'float_normalized'),
               Column('magnesium', 'integer_hashed', num_bins=16),
               Column('ash_band', 'integer_categorical')),
      crosses=(Cross(('magnesium', 'ash_band'), num_bins=32),),
      label='class', head='multiclass', name='wine')
  train = _write_csv(directory / 'train.csv', table, order[:120])
  test = _write_csv(directory / 'test.csv', table, order[120:])
  return Source({TRAIN: train, TEST: test}, spec)


def _diabetes(directory):
  """Regression: 442 rows, train 300, test 142; sex integer categorical."""
  bunch = datasets.load_diabetes(scaled=False)
  x, y = bunch.data, bunch.target
  names = list(bunch.feature_names)
  table = {ID: [float(i) for i in range(len(y))],
           **{n: x[:, names.index(n)] for n in ('bmi', 'bp', 's5')},
           'sex': x[:, names.index('sex')].astype(int),
           'age': x[:, names.index('age')].astype(int),
           'progression': y}
  spec = FeatureSpec(
      columns=(Column(ID, 'float'), Column('bmi', 'float_normalized'),
               Column('bp', 'float_discretized', num_bins=5),
               Column('s5', 'float_normalized'),
               Column('sex', 'integer_categorical'),
               Column('age', 'integer_hashed', num_bins=8)),
      crosses=(Cross(('sex', 'age'), num_bins=16),),
      label='progression', head='regression', name='diabetes')
  train = _write_csv(directory / 'train.csv', table, range(300))
  test = _write_csv(directory / 'test.csv', table, range(300, len(y)))
  return Source({TRAIN: train, TEST: test}, spec)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """name -> (source, its statistics)."""
  made = {}
  for name, write in (('breast_cancer', _breast_cancer), ('wine', _wine),
                      ('diabetes', _diabetes)):
    source = write(tmp_path_factory.mktemp(name))
    made[name] = source, stats_lib.compute(source.feature_spec,
                                           source.columns(TRAIN))
  return made


def _config(**kwargs):
  return TrainConfig(model_dir='/tmp/unused', **kwargs)


def _context(pipelines, pipeline_id, replicas):
  return tf.distribute.InputContext(num_input_pipelines=pipelines,
                                    input_pipeline_id=pipeline_id,
                                    num_replicas_in_sync=replicas)


# --- Statistics -------------------------------------------------------------


def test_statistics_are_the_training_splits(data):
  source, stats = data['breast_cancer']
  columns = source.columns(TRAIN)
  assert stats.num_examples == 400
  radius = columns['mean_radius'].astype(np.float64)
  assert stats.columns['mean_radius'].mean == pytest.approx(radius.mean())
  assert stats.columns['mean_radius'].variance == pytest.approx(radius.var())
  boundaries = stats.columns['mean_texture'].boundaries
  assert len(boundaries) == 3 and list(boundaries) == sorted(boundaries)
  # Quartiles: a quarter of the training values below the first.
  assert np.mean(columns['mean_texture'] < boundaries[0]) == pytest.approx(
      0.25, abs=0.01)
  # By frequency, then value; the missing cells ('') not an entry.
  vocabulary = stats.columns['size'].vocabulary
  counts = {v: int(np.sum(columns['size'] == v)) for v in vocabulary}
  assert set(vocabulary) == {'small', 'medium', 'large'}
  assert list(vocabulary) == sorted(vocabulary, key=lambda v: (-counts[v], v))
  assert stats.num_classes is None  # String labels: the label vocabulary's.
  _, wine = data['wine']
  assert wine.num_classes == 3
  assert all(isinstance(v, int) for v in wine.columns['ash_band'].vocabulary)
  _, diabetes = data['diabetes']
  assert diabetes.num_classes is None
  assert sorted(diabetes.columns['sex'].vocabulary) == [1, 2]
  for _, s in data.values():
    assert stats_lib.Statistics.from_json(s.to_json()) == s
  capped = stats_lib.compute(source.feature_spec, columns, max_vocabulary=2)
  assert capped.columns['size'].vocabulary == vocabulary[:2]


def test_a_columns_vocabulary_thresholds_are_tf_transforms(data):
  """A column's max_vocabulary and min_frequency, as tf.Transform's
  vocabulary(top_k, frequency_threshold): the most frequent values, those
  counted often enough; through the spec's JSON and back."""
  source, stats = data['breast_cancer']
  columns = source.columns(TRAIN)
  vocabulary = stats.columns['size'].vocabulary
  counts = sorted(int(np.sum(columns['size'] == v)) for v in vocabulary)
  def size(**thresholds):
    spec = spec_lib.loads(spec_lib.to_json(source.feature_spec).replace(
        '"kind": "string_categorical"', '"kind": "string_categorical", ' +
        ', '.join(f'"{key}": {value}' for key, value in thresholds.items())))
    assert spec.columns[[c.name for c in spec.columns].index('size')] == (
        dataclasses.replace(source.feature_spec.columns[4], **thresholds))
    return stats_lib.compute(spec, columns).columns['size'].vocabulary
  assert size(max_vocabulary=1) == vocabulary[:1]
  assert size(min_frequency=counts[0] + 1) == vocabulary[:2]
  assert size(max_vocabulary=2, min_frequency=counts[0]) == vocabulary[:2]
  with pytest.raises(DataError, match="column 'size': no value is counted "
                     r'min_frequency \(1000\) times or more'):
    size(min_frequency=1000)
  with pytest.raises(UsageError, match=r'columns\.texture\.min_frequency: '
                     'only for a categorical column whose vocabulary is '
                     'computed'):
    spec_lib.loads(spec_lib.to_json(source.feature_spec).replace(
        '"kind": "string_hashed"', '"kind": "string_hashed", '
        '"min_frequency": 2'))


def test_binary_statistics_reject_a_label_other_than_0_or_1(data):
  source, _ = data['wine']
  with pytest.raises(DataError, match="label column 'class': 2 is not 0 or 1"):
    stats_lib.compute(source.feature_spec, source.columns(TRAIN), 'binary')


def _checkpointed(model_dir):
  """Marks model_dir as a run's with a checkpoint (its state file)."""
  with open(os.path.join(model_dir, layout.CHECKPOINT_STATE_FILE), 'w') as f:
    f.write('model_checkpoint_path: "ckpt-1"\n')


def test_statistics_are_computed_once_and_kept_on_changed_data(
    data, tmp_path, caplog):
  source, _ = data['wine']
  model_dir = str(tmp_path / 'model')
  first = stats_lib.load_or_compute(model_dir, source.feature_spec, source)
  assert stats_lib.read(layout.statistics_file(model_dir)) == first
  assert (tmp_path / 'model/preprocessing/feature_spec.json').exists()
  with caplog.at_level(logging.WARNING):
    again = stats_lib.load_or_compute(model_dir, source.feature_spec, source)
  assert again == first and not caplog.records
  # A resumed run (its model trained on them: a checkpoint) on other data
  # (the test split as training data); without a checkpoint they would be
  # computed again (test_tabular_statistics_pass's stale statistics).
  _checkpointed(model_dir)
  changed = Source({TRAIN: source.patterns[TEST],
                        TEST: source.patterns[TEST]}, source.feature_spec)
  with caplog.at_level(logging.WARNING):
    kept = stats_lib.load_or_compute(model_dir, source.feature_spec, changed)
  assert kept == first
  [record] = caplog.records
  message = record.getMessage()
  assert '\n' not in message and 'keeps the stored ones' in message
  assert "'alcohol' mean" in message


def test_a_resumed_chief_reads_no_data_for_statistics_of_the_same_files(
    data, tmp_path, monkeypatch, caplog):
  """At any size: a restart on the files the statistics were computed from
  makes no second pass (issue 50, item 3). Files rewritten with the same
  rows: one pass, nothing to say, and the files recorded for the next."""
  source, _ = data['breast_cancer']
  files = tmp_path / 'files'
  shutil.copytree(os.path.dirname(source.files(TRAIN)[0]), files)
  copied = Source({split: ','.join(str(files / os.path.basename(path))
                                   for path in source.files(split))
                   for split in (TRAIN, TEST)}, source.feature_spec)
  model_dir = str(tmp_path / 'model')
  first = stats_lib.load_or_compute(model_dir, source.feature_spec, copied)
  _checkpointed(model_dir)  # A restart: of a run that trained on them.
  record = json.loads((tmp_path / 'model' / 'preprocessing' /
                       'training_files.json').read_text())
  assert [path for path, _, _ in record['files']] == list(copied.files(TRAIN))
  passes = []
  summarise = scan.summarise
  monkeypatch.setattr(scan, 'summarise', lambda *args: passes.append(
      args[1]) or summarise(*args))
  with caplog.at_level(logging.WARNING):
    assert stats_lib.load_or_compute(model_dir, source.feature_spec,
                                     copied) == first
    assert passes == []
    rewritten = files / 'train-1.csv'
    rewritten.write_text(rewritten.read_text())
    os.utime(rewritten, ns=(0, 0))  # Another modification time.
    assert stats_lib.load_or_compute(model_dir, source.feature_spec,
                                     copied) == first
    assert passes == [TRAIN]
    assert stats_lib.load_or_compute(model_dir, source.feature_spec,
                                     copied) == first
    assert passes == [TRAIN]
  assert not caplog.records


def test_stored_statistics_of_another_spec_are_a_usage_error(data, tmp_path):
  source, _ = data['wine']
  stats_lib.load_or_compute(str(tmp_path), source.feature_spec, source)
  other = dataclasses.replace(source.feature_spec, columns=(
      *source.feature_spec.columns, Column('proline', 'float_normalized')))
  with pytest.raises(UsageError, match="no mean of column 'proline'"):
    stats_lib.load_or_compute(str(tmp_path), other, source)


def test_a_warm_start_remaps_rows_by_value_and_says_what_else_changed(
    data, tmp_path, caplog):
  """A changed vocabulary's ids map to the source's by value (the
  out-of-vocabulary id to its own, a new value to none) in the tables of
  its column; other changed statistics are said, in one line."""
  source, stats = data['breast_cancer']
  stats_lib.store(str(tmp_path), source.feature_spec, stats)
  inputs = Encoder(source.feature_spec, stats).inputs
  (tmp_path / layout.MODEL_FILE).write_text(json.dumps({'model_input': {
      name: dataclasses.asdict(value) for name, value in inputs.items()}}))
  size, radius = stats.columns['size'], stats.columns['mean_radius']
  changed = dataclasses.replace(stats, columns={
      **stats.columns,
      'size': dataclasses.replace(size, vocabulary=(
          *reversed(size.vocabulary), 'huge')),
      'mean_radius': dataclasses.replace(radius, mean=radius.mean + 1)})
  assert warm_start.remapping(str(tmp_path), stats) is None
  with caplog.at_level(logging.WARNING):
    remapping = warm_start.remapping(str(tmp_path), changed)
  assert {name: rows.tolist() for name, rows in remapping.rows.items()} == {
      'size': [0, *range(len(size.vocabulary), 0, -1), -1]}
  assert remapping.model_input == inputs
  [record] = caplog.records
  assert "'mean_radius' mean" in record.getMessage()
  assert 'vocabulary' not in record.getMessage()
  model = tabular_models.wide_deep(Encoder(source.feature_spec,
                                           changed).inputs, 1)
  tables = remapping.tables(model)
  assert sorted(model.weights[i].name for i in tables) == [
      'dnn/embedding_size/embeddings:0', 'linear/weights_size/embeddings:0']
  assert {table.label for table in tables.values()} == {'size (1 new value)'}


class _Said(logging.Handler):
  """Sets `event` when a record's message contains `words`."""

  def __init__(self, words):
    super().__init__()
    self.words, self.event = words, threading.Event()

  def emit(self, record):
    if self.words in record.getMessage():
      self.event.set()


def test_other_tasks_wait_for_the_chiefs_statistics(data, tmp_path):
  source, _ = data['wine']
  model_dir = str(tmp_path)
  said = _Said('Waiting for the chief')
  logger = logging.getLogger(stats_lib.__name__)
  logger.addHandler(said)
  logger.setLevel(logging.INFO)
  got = {}
  waiter = threading.Thread(target=lambda: got.update(
      stats=stats_lib.load_or_compute(model_dir, source.feature_spec, None,
                                      is_chief=False, timeout_secs=60)))
  try:
    waiter.start()
    assert said.event.wait(60)  # The worker waits: no file yet.
    chiefs = stats_lib.load_or_compute(model_dir, source.feature_spec, source)
    waiter.join(60)
  finally:
    logger.removeHandler(said)
  assert got['stats'] == chiefs


def test_waiting_for_the_chief_is_bounded(data, tmp_path):
  source, _ = data['wine']
  with pytest.raises(TrainerError, match='statistics.json: the chief did not '
                     r'write the tabular statistics in 0.3 s'):
    stats_lib.load_or_compute(str(tmp_path), source.feature_spec, None,
                              is_chief=False, timeout_secs=0.3)


# --- Encoder ----------------------------------------------------------------


def _encoder(data, name):
  source, stats = data[name]
  return Encoder(source.feature_spec, stats)


def _raw_batch(source, split=TEST):
  records = next(iter(source.records(split).batch(1000)))
  return source.parse(records)


def test_encoder_outputs_what_its_inputs_describe(data):
  for source, stats in data.values():
    encoder = Encoder(source.feature_spec, stats)
    raw, _, _ = _raw_batch(source)
    encoded = encoder(raw)
    assert list(encoded) == list(encoder.inputs)
    for name, described in encoder.inputs.items():
      json.dumps(dataclasses.asdict(described))
      value = encoded[name].numpy()
      if described.kind == 'dense':
        assert value.dtype == np.float32 and value.shape == (len(value), 1)
      else:
        assert value.dtype == np.int64 and value.ndim == 1
        assert 0 <= value.min() and value.max() < described.cardinality
  inputs = _encoder(data, 'breast_cancer').inputs
  assert inputs['size'] == EncodedInput('ids', cardinality=4, embedding_dim=2)
  assert inputs['mean_texture'] == EncodedInput('ids', cardinality=4)
  assert inputs['mean_radius'] == EncodedInput('dense', width=1)
  assert inputs['size_X_texture'] == EncodedInput(
      'ids', cardinality=16, cross=True)


def test_encoder_normalizes_and_looks_up_as_the_statistics_say(data):
  source, stats = data['breast_cancer']
  encoder = Encoder(source.feature_spec, stats)
  raw, _, _ = _raw_batch(source, TRAIN)
  encoded = encoder(raw)
  radius = encoded['mean_radius'].numpy()
  assert radius.mean() == pytest.approx(0, abs=1e-4)
  assert radius.std() == pytest.approx(1, abs=1e-4)
  vocabulary = stats.columns['size'].vocabulary
  ids = encoder({**raw, 'size': tf.constant(
      [vocabulary[0], vocabulary[2], '', 'huge'] * 100)})['size'].numpy()
  assert ids[:4].tolist() == [1, 3, 0, 0]  # 0: out of vocabulary.
  bins = encoded['mean_texture'].numpy()
  assert np.bincount(bins).tolist() == pytest.approx([100] * 4, abs=2)


def test_a_missing_number_is_the_mean_of_the_present_ones(tmp_path):
  """Issue 45: a missing number counted as 0.0 inside the mean (91.4 where
  the present values average about 100) and was served as 0.0."""
  table = {'x': [100.0, None, 98.0, None, 102.0, 100.0],
           'n': [5, 7, None, 9, 7, 8],
           'x2': [None, 3.0, 3.0, 3.0, None, 3.0],
           'y': [0, 1, 0, 1, 0, 1]}
  spec = FeatureSpec((Column('x', 'float_normalized'),
                      Column('n', 'float', dtype='int64'),
                      Column('x2', 'float', default=1.0)),
                     'y', head='binary')
  path = _write_csv(tmp_path / 'train.csv', table, range(6))
  source = Source({TRAIN: path, TEST: path}, spec)
  stats = stats_lib.compute(spec, source.columns(TRAIN))
  assert (stats.columns['x'].mean, stats.columns['x'].fill) == (100.0, 100.0)
  assert stats.columns['x'].variance == pytest.approx(2.0)
  assert stats.columns['n'].fill == 7.2
  # The column's own default stands for a missing cell: nothing to fill.
  assert stats.columns['x2'].fill == pytest.approx(14 / 6)
  encoder = Encoder(spec, stats)
  raw, _, _ = source.parse(tf.constant(list(
      source.records(TRAIN).as_numpy_iterator())))
  encoded = encoder(raw)
  assert encoded['x'].numpy()[:, 0].tolist() == pytest.approx(
      [0, 0, -2 ** 0.5, 0, 2 ** 0.5, 0], abs=1e-6)
  assert encoded['n'].numpy()[:, 0].tolist() == pytest.approx(
      [5, 7, 7.2, 9, 7, 8])
  assert encoded['x2'].numpy()[:, 0].tolist() == [1, 3, 3, 3, 1, 3]
  # Statistics stored before the fill (none): a missing number is 0.0, as
  # the model_dir's model was trained.
  old = stats_lib.Statistics({'x': dataclasses.replace(
      stats.columns['x'], fill=None)}, 6)
  assert Encoder(spec, old)({'x': tf.constant([float('nan')]),
                             'n': tf.constant([1], tf.int64),
                             'x2': tf.constant([1.0])})['x'].numpy()[0, 0] \
      == pytest.approx(-100 / 2 ** 0.5)


def test_a_missing_indicator_says_which_numbers_were_filled(tmp_path):
  """Issue 45, item 4: a float or float_normalized column with
  `missing_indicator` gives its models [value, 1.0 if missing] (the
  filled mean alone cannot tell a missing value from the mean); it reads
  back from the spec's JSON, and the models take the wider input."""
  table = {'x': [100.0, None, 98.0, None, 102.0, 100.0],
           'n': [5, 7, None, 9, 7, 8], 'y': [0, 1, 0, 1, 0, 1]}
  spec = FeatureSpec((Column('x', 'float_normalized', missing_indicator=True),
                      Column('n', 'float', dtype='int64',
                             missing_indicator=True)), 'y', head='binary')
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec
  assert 'missing_indicator' not in spec_lib.to_json(
      FeatureSpec((Column('x', 'float'),), 'y'))
  path = _write_csv(tmp_path / 'train.csv', table, range(6))
  source = Source({TRAIN: path, TEST: path}, spec)
  encoder = Encoder(spec, stats_lib.compute(spec, source.columns(TRAIN)))
  assert {name: encoded.width for name, encoded in encoder.inputs.items()
          } == {'x': 2, 'n': 2}
  raw, _, _ = source.parse(tf.constant(list(
      source.records(TRAIN).as_numpy_iterator())))
  encoded = encoder(raw)
  np.testing.assert_allclose(
      encoded['x'], [[0, 0], [0, 1], [-2 ** 0.5, 0], [0, 1], [2 ** 0.5, 0],
                     [0, 0]], atol=1e-6)
  np.testing.assert_allclose(
      encoded['n'], [[5, 0], [7, 0], [7.2, 1], [9, 0], [7, 0], [8, 0]],
      rtol=1e-6)
  for builder in ('linear', 'dnn'):
    assert models_lib.build(builder, encoder.inputs, 1)(encoded).shape == (
        6, 1)


@pytest.mark.parametrize('column, message', [
    ({'kind': 'float_discretized', 'num_bins': 4, 'missing_indicator': True},
     'only for float and float_normalized columns, not float_discretized'),
    ({'kind': 'string_categorical', 'missing_indicator': True},
     'only for float and float_normalized columns'),
    ({'kind': 'float', 'default': 0.0, 'missing_indicator': True},
     'a column with a default has no missing values to indicate'),
    ({'kind': 'float', 'missing_indicator': 'yes'},
     "expected true or false, got 'yes'"),
])
def test_a_bad_missing_indicator_is_a_usage_error(column, message):
  with pytest.raises(UsageError, match=f'columns.x.missing_indicator: '
                     f'{re.escape(message)}'):
    spec_lib.loads(json.dumps({'columns': {'x': column}, 'label': 'y'}))


def test_encoder_labels_and_class_names(data):
  source, stats = data['breast_cancer']
  encoder = Encoder(source.feature_spec, stats)
  assert encoder.class_names('binary') == ('malignant', 'benign')
  labels = encoder.encode_label(tf.constant(['benign', 'malignant']), 'binary')
  assert labels.dtype == tf.int64 and labels.numpy().tolist() == [1, 0]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"(?s)label 'diagnosis' not in the label vocabulary "
                     r"\(malignant, benign\):.*maybe"):
    encoder.encode_label(tf.constant(['benign', 'maybe']), 'binary')
  wine = _encoder(data, 'wine')
  assert wine.class_names('multiclass') == ('0', '1', '2')
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"(?s)label 'class' not a class id 0..2:.*\b3\b"):
    wine.encode_label(tf.constant([0, 3], tf.int64), 'multiclass')
  diabetes = _encoder(data, 'diabetes')
  assert diabetes.class_names('regression') == ()
  assert diabetes.encode_label(tf.constant([1.5]), 'regression').dtype == (
      tf.float32)
  with pytest.raises(UsageError, match="--head=multiclass needs the classes"):
    diabetes.class_names('multiclass')
  source, stats = data['wine']
  multilabel = Encoder(dataclasses.replace(
      source.feature_spec, label=('a', 'b'), head='multilabel'), stats)
  assert multilabel.class_names('multilabel') == ('a', 'b')
  labels = multilabel.encode_label(tf.constant([[0, 1], [1, 1]], tf.int64),
                                   'multilabel')
  assert labels.dtype == tf.float32 and labels.shape == (2, 2)


def test_encoder_is_built_inside_a_tf_function(data):
  """As in a serving signature: the tables are created while tracing."""
  source, stats = data['wine']
  raw, _, _ = _raw_batch(source)

  @tf.function
  def encode(raw):
    return Encoder(source.feature_spec, stats)(raw)

  traced, eager = encode(raw), Encoder(source.feature_spec, stats)(raw)
  for name in eager:
    np.testing.assert_array_equal(traced[name], eager[name])


def test_encoder_serves_from_a_saved_model(data, tmp_path):
  """As an export carries it: the tables saved with the model."""
  source, stats = data['breast_cancer']
  encoder = Encoder(source.feature_spec, stats)
  module = tf.Module()
  module.encoder = encoder
  module.encode = tf.function(encoder.__call__, input_signature=[{
      c.name: tf.TensorSpec([None], c.dtype, name=c.name)
      for c in source.feature_spec.columns}])
  tf.saved_model.save(module, str(tmp_path))
  raw, _, _ = _raw_batch(source)
  served, eager = tf.saved_model.load(str(tmp_path)).encode(raw), encoder(raw)
  assert set(served) == set(eager)
  for name in eager:
    np.testing.assert_array_equal(served[name], eager[name])


# --- input_fn ---------------------------------------------------------------


def _eval_rows(source, stats, pipelines, replicas, batch=16):
  """(row ids, weights, padding) of every pipeline's EVAL batches; steps
  per pipeline."""
  input_fn = make_input_fn(_config(), batch, source, stats)
  ids, weights, padding, steps = [], [], [], []
  for pipeline in range(pipelines):
    batches = list(input_fn(ModeKeys.EVAL,
                            _context(pipelines, pipeline, replicas)))
    steps.append(len(batches))
    for features, labels in batches:
      assert labels.shape[0] == features[ID].shape[0]
      ids.append(features[ID].numpy()[:, 0])
      weights.append(features[WEIGHT].numpy())
      padding.append(features[PADDING].numpy())
  return (np.concatenate(ids), np.concatenate(weights),
          np.concatenate(padding), steps)


@pytest.mark.parametrize('pipelines,replicas', [(1, 1), (1, 2), (2, 2)])
def test_evaluation_sees_every_example_once(data, pipelines, replicas):
  for name in ('breast_cancer', 'wine'):
    source, stats = data[name]
    expected = sorted(source.columns(TEST)[ID].astype(np.float32))
    ids, weights, padding, steps = _eval_rows(source, stats, pipelines,
                                              replicas)
    assert len(set(steps)) == 1  # Every pipeline the same number of steps.
    # PADDING marks the padded rows (num_examples leaves them out), which
    # weigh 0; breast cancer's weight column is 2 for malignant.
    real = ~padding
    assert sorted(ids[real]) == expected
    assert (weights[padding] == 0).all() and padding.any()
    if name == 'breast_cancer':
      assert set(weights[real]) == {1.0, 2.0}


def test_training_batches_are_seeded_and_split_per_replica(data):
  source, stats = data['breast_cancer']
  config = _config(shuffle_buffer=1000, seed=7)
  first = [next(iter(make_input_fn(config, 32, source, stats)(
      ModeKeys.TRAIN, _context(1, 0, 2)))) for _ in range(2)]
  (features, labels), (again, _) = first
  assert features[ID].shape == (16, 1)  # 32 split over 2 replicas.
  np.testing.assert_array_equal(features[ID], again[ID])
  assert labels.dtype == tf.int64
  assert set(features[WEIGHT].numpy()) <= {1.0, 2.0}
  ids = features[ID].numpy()[:, 0]
  assert (ids < 400).all() and list(ids) != sorted(ids)  # Shuffled train rows.
  # Two pipelines: disjoint shards of the train split.
  seen = [set(np.concatenate([f[ID].numpy()[:, 0] for f, _ in make_input_fn(
      config, 8, source, stats)(ModeKeys.TRAIN, _context(2, i, 2)).take(25)]))
          for i in range(2)]
  assert not seen[0] & seen[1]


def test_training_files_past_the_cache_size_train_in_the_same_order(
    data, monkeypatch, caplog):
  """Past CACHE_BYTES a pipeline reads its files again every epoch instead
  of caching them in memory: the same batches, epoch after epoch."""
  from estimator_trainer.tabular import input as input_lib  # pylint: disable=g-import-not-at-top
  source, stats = data['breast_cancer']
  config = _config(shuffle_buffer=1000, seed=7)

  def ids():  # 400 training rows: 30 batches of 32 are 2.4 epochs.
    return np.concatenate([f[ID].numpy()[:, 0] for f, _ in make_input_fn(
        config, 32, source, stats)(ModeKeys.TRAIN).take(30)])

  cached = ids()
  monkeypatch.setattr(input_lib, 'CACHE_BYTES', 0)
  with caplog.at_level(logging.INFO, logger=input_lib.__name__):
    np.testing.assert_array_equal(ids(), cached)
  assert 'reads the training files every epoch' in caplog.text


def test_prediction_reads_num_predictions_test_examples(data):
  source, stats = data['breast_cancer']  # It has a weight column.
  input_fn = make_input_fn(_config(num_predictions=5), 4, source, stats)
  batches = list(input_fn(ModeKeys.PREDICT))
  assert all(isinstance(b, dict) and WEIGHT not in b for b in batches)
  ids = np.concatenate([b[ID].numpy()[:, 0] for b in batches])
  assert ids.tolist() == [400, 401, 402, 403, 404]


def test_columns_named_weight_and_padding_are_features_beside_the_weights(
    tmp_path):
  """Issue 72, item 5: columns named `weight` and `padding` (refused
  before: the features' keys of the example weights and the padding) are
  features in every mode; the weights (the weight column `w`) and the
  padding go under keys apart from them, models.FeatureKeys.of the
  encoded columns."""
  table = {ID: [float(i) for i in range(15)],
           'weight': [10.0 * i for i in range(15)],
           'padding': ['a', 'b', 'c'] * 5,
           'w': [i + 1.0 for i in range(15)],
           'label': [i % 2 for i in range(15)]}
  spec = FeatureSpec(
      columns=(Column(ID, 'float'), Column('weight', 'float'),
               Column('padding', 'string_categorical')),
      label='label', weight='w', head='binary')
  source = Source({TRAIN: _write_csv(tmp_path / 'train.csv', table,
                                     range(10)),
                   TEST: _write_csv(tmp_path / 'test.csv', table,
                                    range(10, 15))}, spec)
  stats = stats_lib.compute(spec, source.columns(TRAIN))
  keys = models_lib.FeatureKeys.of(Encoder(spec, stats).inputs)
  assert (keys.weight, keys.padding) == ('_weight', '_padding')
  input_fn = make_input_fn(_config(shuffle_buffer=0, num_predictions=5), 4,
                           source, stats)
  codes = {v: i for i, v in enumerate(stats.columns['padding'].vocabulary)}
  columns = {ID, 'weight', 'padding'}

  def assert_columns(features, rows):
    np.testing.assert_array_equal(features['weight'][:, 0], 10.0 * rows)
    np.testing.assert_array_equal(
        features['padding'],
        [codes['abc'[int(i) % 3]] + OOV_INDICES for i in rows])
    assert set(keys.inputs(features)) == columns

  features, _ = next(iter(input_fn(ModeKeys.TRAIN)))
  rows = features[ID].numpy()[:, 0]
  assert set(features) == columns | {'_weight'}
  assert_columns(features, rows)
  np.testing.assert_array_equal(features['_weight'], rows + 1)
  features = [f for f, _ in input_fn(ModeKeys.EVAL)]  # 5 rows, padded to 8.
  padded = np.concatenate([f['_padding'] for f in features])
  weights = np.concatenate([f['_weight'] for f in features])
  rows = np.concatenate([f[ID].numpy()[:, 0] for f in features])
  assert set(features[0]) == columns | {'_weight', '_padding'}
  assert padded.tolist() == [False] * 5 + [True] * 3
  np.testing.assert_array_equal(weights, [11, 12, 13, 14, 15, 0, 0, 0])
  assert_columns(features[0], rows[:4])
  predicted = next(iter(input_fn(ModeKeys.PREDICT)))
  # Beside them, each row's place, forwarded to its prediction (issue 74).
  assert set(predicted) == columns | {keys.forward + 'file',
                                      keys.forward + 'line'}
  assert_columns(predicted, predicted[ID].numpy()[:, 0])


# --- In Estimator's graph and under MirroredStrategy ------------------------


def _logits(inputs, features, num_outputs):
  """A tiny model on every encoded input but the row index: ids embedded,
  dense as they are."""
  parts = [features[name] if described.kind == 'dense' else
           tf.keras.layers.Embedding(described.cardinality, 2,
                                     name=f'embed_{name}')(features[name])
           for name, described in inputs.items() if name != ID]
  return tf.keras.layers.Dense(num_outputs, name='logits')(
      tf.concat(parts, axis=1))


def _estimator_model_fn(features, labels, mode, params):
  logits = _logits(params['inputs'], features, 2)
  predictions = tf.argmax(logits, axis=1)
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(mode, predictions={
        'class_ids': predictions, ID: features[ID][:, 0]})
  weights = features[WEIGHT]
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(
      labels, logits, weights)
  train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(
      loss, tf.compat.v1.train.get_or_create_global_step())
  real = weights > 0
  metrics = {
      'accuracy': tf.compat.v1.metrics.accuracy(labels, predictions, real),
      'examples': tf.compat.v1.metrics.true_positives(
          tf.ones_like(real), real),
      'mean_row': tf.compat.v1.metrics.mean(features[ID], real),
  }
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                    eval_metric_ops=metrics)


@pytest.mark.slow
@pytest.mark.estimator
@pytest.mark.parametrize('distributed', [False, True])
def test_estimator_trains_and_evaluates_on_encoded_features(
    data, tmp_path, distributed):
  source, stats = data['breast_cancer']
  mirrored = make_strategy('mirrored', 2) if distributed else None
  # v1 sessions need the 2 logical CPUs too.
  session_config = tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                            device_count={'CPU': 2})
  run_config = tf.estimator.RunConfig(
      model_dir=str(tmp_path), tf_random_seed=1, session_config=session_config,
      train_distribute=mirrored, eval_distribute=mirrored)
  estimator = tf.estimator.Estimator(
      _estimator_model_fn, config=run_config,
      params={'inputs': Encoder(source.feature_spec, stats).inputs})
  input_fn = make_input_fn(_config(shuffle_buffer=400), 32, source, stats)
  estimator.train(lambda input_context=None: input_fn(
      ModeKeys.TRAIN, input_context), max_steps=60)
  result = estimator.evaluate(lambda input_context=None: input_fn(
      ModeKeys.EVAL, input_context))
  test_rows = source.columns(TEST)[ID]
  assert result['examples'] == len(test_rows)  # Each once, padding not.
  assert result['mean_row'] == pytest.approx(test_rows.mean())
  majority = max(np.mean(source.columns(TEST)['diagnosis'] == c)
                 for c in source.feature_spec.label_vocabulary)
  assert result['accuracy'] > majority + 0.1
  predicted = list(estimator.predict(lambda: input_fn(ModeKeys.PREDICT)))
  assert [p[ID] for p in predicted] == list(test_rows[:10])


@pytest.mark.slow
def test_mirrored_strategy_trains_and_evaluates_each_example_once(data):
  source, stats = data['wine']
  strategy = make_strategy('mirrored', 2)
  input_fn = make_input_fn(_config(shuffle_buffer=120, seed=3), 16, source,
                           stats)
  inputs = Encoder(source.feature_spec, stats).inputs
  with strategy.scope():
    features = {name: tf.keras.Input(
        (d.width,) if d.kind == 'dense' else (), name=name,
        dtype=tf.float32 if d.kind == 'dense' else tf.int64)
                for name, d in inputs.items()}
    model = tf.keras.Model(features, _logits(inputs, features, 3))
    optimizer = tf.keras.optimizers.Adam(0.05)

  def loss_of(features, labels):
    per_example = tf.keras.losses.sparse_categorical_crossentropy(
        labels, model({n: features[n] for n in inputs}), from_logits=True)
    return tf.reduce_sum(per_example) / 16

  @tf.function
  def train_step(features, labels):
    def step(features, labels):
      with tf.GradientTape() as tape:
        loss = loss_of(features, labels)
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return strategy.reduce('SUM', strategy.run(step, (features, labels)),
                           None)

  train = iter(strategy.distribute_datasets_from_function(
      lambda context: input_fn(ModeKeys.TRAIN, context)))
  losses = [float(train_step(*next(train))) for _ in range(40)]
  assert np.mean(losses[-5:]) < np.mean(losses[:5])

  @tf.function
  def eval_step(features, labels):
    def step(features, labels):
      correct = tf.cast(tf.argmax(model({n: features[n] for n in inputs}),
                                  axis=1) == labels, tf.float32)
      return features[ID][:, 0], features[WEIGHT], correct
    return strategy.run(step, (features, labels))

  # An encoder built beforehand, under the strategy's scope.
  with strategy.scope():
    encoder = Encoder(source.feature_spec, stats)
  eval_input_fn = make_input_fn(_config(), 16, source, stats, encoder=encoder)
  ids, weights, correct = [], [], []
  for features, labels in strategy.distribute_datasets_from_function(
      lambda context: eval_input_fn(ModeKeys.EVAL, context)):
    for i, w, c in zip(*(strategy.experimental_local_results(t)
                         for t in eval_step(features, labels))):
      ids.append(i.numpy())
      weights.append(w.numpy())
      correct.append(c.numpy())
  ids, weights, correct = map(np.concatenate, (ids, weights, correct))
  real = weights > 0
  assert sorted(ids[real]) == sorted(source.columns(TEST)[ID])
  assert np.mean(correct[real]) > 0.6  # 3 classes of 58 examples.


def test_a_regressions_statistics_hold_its_label_scale(data):
  """The regression head's label scale: the training labels' mean and
  standard deviation, stored and read back; none for a classifier."""
  source, stats = data['diabetes']
  labels = source.columns(TRAIN)['progression'].astype(np.float64)
  assert stats.label_scale == pytest.approx((labels.mean(), labels.std()))
  assert stats_lib.Statistics.from_json(stats.to_json()) == stats
  assert data['wine'][1].label_scale is None


def test_the_prior_l2_is_logistic_regressions_and_ridges():
  """Issue 45, item 3: the linear model's default L2 factor on its mean
  loss (priors.prior_weight_decay) puts the optimum where scikit-learn's
  defaults put theirs: LogisticRegression(C=1) and Ridge(alpha=1)."""
  # pylint: disable=g-import-not-at-top
  from scipy import optimize
  from sklearn import linear_model
  from estimator_trainer.tabular import priors
  rng = np.random.default_rng(0)
  x = rng.normal(size=(60, 3))
  labels = (x @ [2.0, -1.0, 0.5] + rng.normal(size=60) > 0).astype(float)
  values = x @ [3.0, 1.0, -2.0] + 10 + rng.normal(size=60) * 4
  for head, y in (('binary', labels), ('regression', values)):
    scale = (float(y.mean()), float(y.std())) if head == 'regression' else None
    decay = priors.prior_weight_decay(
        stats_lib.Statistics({}, len(y), label_scale=scale), scale)

    def objective(params, y=y, head=head, decay=decay):
      # The package's: the mean loss of logits x.w + b (regression: the
      # value (x.w + b) * stddev + mean) plus decay * |w|^2.
      w, b = params[:-1], params[-1]
      logits = x @ w + b
      if head == 'binary':
        loss = np.mean(np.logaddexp(0, logits) - y * logits)
      else:
        loss = np.mean((y - (logits * scale[1] + scale[0])) ** 2)
      return loss + decay * np.sum(w ** 2)

    ours = optimize.minimize(objective, np.zeros(4), method='BFGS',
                             options={'gtol': 1e-10}).x[:-1]
    if head == 'binary':
      theirs = linear_model.LogisticRegression(C=1.0, tol=1e-10).fit(
          x, y).coef_[0]
    else:
      theirs = linear_model.Ridge(alpha=1.0).fit(x, y).coef_ / scale[1]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)


def test_the_deep_models_l2_is_ten_linear_priors_and_at_least_fifty_rows():
  """Issue 72, item 3: `dnn` and `wide_deep` take 10 x the linear prior on
  small tables (pima's 426 rows: 10 / (2 x 426)), the prior of 50 rows
  on larger ones (creditcard's 1,055: 1 / (2 x 50)), and at most 30 x the
  prior beyond 1,500 rows (caravan's 4,658: 30 / (2 x 4,658); default's
  8,000 with the numeric embedding: log loss +1.0 % of
  LogisticRegression's, +5.1 % at 100 x), a regression's in its label
  variance's units, as the prior is."""
  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular import priors
  for rows, scale, expected in ((426, None, 10 * 0.5 / 426),
                                (1055, None, 0.5 / 50),
                                (4658, None, 30 * 0.5 / 4658),
                                (40000, None, 30 * 0.5 / 40000),
                                (320, (7.5, 2.0), 10 * 4.0 / 320),
                                (1200, (7.5, 2.0), 4.0 / 50),
                                (3000, (7.5, 2.0), 30 * 4.0 / 3000)):
    statistics = stats_lib.Statistics({}, rows, label_scale=scale)
    assert priors.deep_weight_decay(statistics, scale) == (
        pytest.approx(expected))
    prior = priors.prior_weight_decay(statistics, scale)
    assert 10 * prior - 1e-12 <= priors.deep_weight_decay(
        statistics, scale) <= 30 * prior + 1e-12
  assert priors.deep_weight_decay(
      stats_lib.Statistics({}, 0), None) is None
