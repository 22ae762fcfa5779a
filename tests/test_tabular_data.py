"""Tabular data (issue 34): the feature spec, its inference, and
TabularSource over CSV and TFRecords of tf.Example, on scikit-learn's
bundled datasets and a generated census-like set (string categoricals, a
high-cardinality id, missing values, string labels, a weight column)."""

import csv
import gzip
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn import datasets
import tensorflow as tf

from estimator_trainer import sources
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.tabular import dataset as dataset_lib
from estimator_trainer.tabular import infer as infer_lib
from estimator_trainer.tabular import numpy_columns
from estimator_trainer.tabular import parsing
from estimator_trainer.tabular import source as source_lib
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.spec import Column, Cross, FeatureSpec
import warm_process

TRAIN, TEST = sources.TRAIN, sources.TEST
CENSUS_ROWS = 240
EDUCATION = ('Bachelors', 'Doctorate', 'HS-grad', 'Masters', 'Some-college')


def _feature(value):
  if isinstance(value, str):
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[value.encode()]))
  if isinstance(value, (int, np.integer)):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
  return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))


def _write(directory, name, rows, sizes, header):
  """Writes `rows` (dicts; None: missing) as CSV files `name-i.csv` (an
  empty cell) and TFRecords `name-i.tfrecord` (an absent feature) of
  `sizes` rows each; returns their globs (csv, tfrecord)."""
  starts = np.cumsum((0,) + tuple(sizes))
  for i in range(len(sizes)):
    part = rows[starts[i]:starts[i + 1]]
    with open(directory / f'{name}-{i}.csv', 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(header)
      writer.writerows([['' if row[k] is None else row[k] for k in header]
                        for row in part])
    with tf.io.TFRecordWriter(str(directory / f'{name}-{i}.tfrecord')) as w:
      for row in part:
        w.write(tf.train.Example(features=tf.train.Features(feature={
            k: _feature(v) for k, v in row.items() if v is not None
        })).SerializeToString())
  return str(directory / f'{name}-*.csv'), str(directory / f'{name}-*.tfrecord')


def _sklearn_rows(loader, label_type):
  bunch = loader()
  names = [n.replace(' ', '_') for n in bunch.feature_names]
  rows = [{**{n: float(x) for n, x in zip(names, data)},
           'target': label_type(y)}
          for data, y in zip(bunch.data, bunch.target)]
  return rows, names + ['target']


@pytest.fixture(scope='module')
def sklearn_data(tmp_path_factory):
  """name -> (csv glob, tfrecord glob, rows) of breast_cancer (binary),
  wine (multiclass), diabetes (regression), each in 3 files."""
  directory = tmp_path_factory.mktemp('sklearn')
  result = {}
  for name, loader, label_type in (
      ('breast_cancer', datasets.load_breast_cancer, int),
      ('wine', datasets.load_wine, int),
      ('diabetes', datasets.load_diabetes, float)):
    rows, header = _sklearn_rows(loader, label_type)
    third = len(rows) // 3
    result[name] = (*_write(directory, name, rows,
                            (third, third, len(rows) - 2 * third), header),
                    rows)
  return result


def _census_rows(n, seed=0):
  rng = np.random.default_rng(seed)

  def maybe(value):  # About 1 in 12 values missing.
    return None if rng.random() < 1 / 12 else value

  return [{
      'age': maybe(float(rng.integers(17, 90))),
      'hours': float(rng.normal(40, 10)),
      'children': maybe(int(rng.integers(0, 5))),
      'education': maybe(str(rng.choice(EDUCATION))),
      # One with CSV's separator and quote in it.
      'occupation': f'occ-{rng.integers(0, 11)}' if rng.random() > 0.1 else
                    'Armed-Forces, "reserve"',
      'user_id': f'u{rng.integers(0, 100_000)}',
      'income': str(rng.choice(['<=50K', '>50K'])),
      'fnlwgt': float(rng.uniform(0.5, 2.0)),
  } for _ in range(n)]


CENSUS_HEADER = ['age', 'hours', 'children', 'education', 'occupation',
                 'user_id', 'income', 'fnlwgt']
CENSUS_SPEC = FeatureSpec(
    (Column('age', 'float_normalized', default=38.0),
     Column('hours', 'float_discretized', num_bins=4),
     Column('children', 'integer_categorical'),
     Column('education', 'string_categorical', default='unknown'),
     Column('occupation', 'string_categorical', embedding_dim=4),
     Column('user_id', 'string_hashed', num_bins=512)),
    'income', (Cross(('education', 'occupation'), 64),),
    ('<=50K', '>50K'), 'fnlwgt', 'binary', 'census')


@pytest.fixture(scope='module')
def census(tmp_path_factory):
  """(csv glob, tfrecord glob, rows): 240 rows in files of 100, 80, 60."""
  rows = _census_rows(CENSUS_ROWS)
  return (*_write(tmp_path_factory.mktemp('census'), 'census', rows,
                  (100, 80, 60), CENSUS_HEADER), rows)


def _source(pattern, spec, test_pattern=None):
  return source_lib.TabularSource(
      {TRAIN: pattern, TEST: test_pattern or pattern}, spec)


def _expected(rows, column):
  """The values `columns()` and `parse` give `column`: missing ones its
  default."""
  default = parsing.feature_default(column)
  return [default if row[column.name] is None else row[column.name]
          for row in rows]


# The feature spec.


def test_spec_round_trips_through_json_and_yaml(tmp_path):
  path = tmp_path / 'spec.json'
  path.write_text(spec_lib.to_json(CENSUS_SPEC))
  assert spec_lib.read(str(path)) == CENSUS_SPEC
  values = json.loads(path.read_text())
  assert values['columns']['hours'] == {'kind': 'float_discretized',
                                        'num_bins': 4}
  yaml_path = tmp_path / 'spec.yaml'
  yaml_path.write_text(
      'columns:\n  x: {kind: float}\n  y: {kind: string_hashed, '
      'num_bins: 8}\nlabel: [a, b]\nhead: multilabel\n')
  assert spec_lib.read(str(yaml_path)) == FeatureSpec(
      (Column('x', 'float'), Column('y', 'string_hashed', num_bins=8)),
      ('a', 'b'), head='multilabel')


_GOOD = {'columns': {'age': {'kind': 'float'},
                     'edu': {'kind': 'string_categorical'}},
         'label': 'y'}


@pytest.mark.parametrize('change, key_and_message', [
    (None, "not JSON (Expecting ',' delimiter: line 1 column 15 (char 14))"),
    ({'columns': {'age': {'kind': 'flaot'}}},
     "columns.age.kind: unknown kind 'flaot'; the kinds: float, "
     'float_normalized, float_discretized, integer_categorical, '
     'string_categorical, string_hashed, integer_hashed'),
    ({'columns': {'z': {'kind': 'string_hashed'}}},
     'columns.z.num_bins: missing; a string_hashed column needs it'),
    ({'columns': {'z': {'kind': 'float_discretized'}}},
     'columns.z.num_bins: missing; a float_discretized column needs it'),
    ({'columns': {'z': {'kind': 'float', 'num_bins': 3}}},
     'columns.z.num_bins: only for string_hashed, integer_hashed, '
     'float_discretized columns, not float'),
    ({'columns': {'z': {'kind': 'float', 'default': 'x'}}},
     "columns.z.default: 'x' is not a float32 value (the kind float)"),
    ({'columns': {'z': {'kind': 'float_normalized', 'embedding_dim': 4}}},
     'columns.z.embedding_dim: a float_normalized column has no ids to '
     'embed'),
    ({'columns': {'z': {'kind': 'string_hashed', 'num_bins': 0}}},
     'columns.z.num_bins: expected a positive integer, got 0'),
    ({'columns': {'z': {'knd': 'float'}}},
     'columns.z.knd: unknown key; the keys: boundaries, default, dtype, '
     'embedding_dim, kind, max_vocabulary, min_frequency, missing_indicator, '
     'num_bins, num_oov, one_hot, oov_value, parts, source, vocabulary'),
    ({'columns': {'z': {'kind': 'string_categorical', 'oov_value': 'a',
                        'vocabulary': ['b', 'c']}}},
     "columns.z.oov_value: 'a' is not in the column's given vocabulary"),
    ({'crosses': [{'columns': ['edu', 'job'], 'num_bins': 8}]},
     "crosses[0].columns: no column 'job' in columns"),
    ({'crosses': [{'columns': ['edu', 'age'], 'num_bins': 8}]},
     "crosses[0].columns: 'age' is a float column; crosses take categorical "
     'and hashed columns'),
    ({'crosses': [{'columns': ['edu', 'edu']}]},
     'crosses[0].num_bins: missing; a cross hashes into num_bins ids'),
    ({'label': 'age'}, "label: 'age' is also a feature column"),
    ({'weight': 'y'}, "weight: 'y' is also a feature or label column"),
    ({'head': 'logistic'}, "head: unknown head 'logistic'; the heads: "
     'multiclass, binary, multilabel, regression'),
    ({'head': 'regression', 'label_vocabulary': ['a', 'b']},
     'label_vocabulary: not for the head regression'),
    ({'head': 'binary', 'label_vocabulary': ['a', 'b', 'c']},
     'label_vocabulary: a binary head has 2 classes, got 3'),
    ({'label_vocabulary': 'yes'},
     "label_vocabulary: expected a list of the classes, got 'yes'"),
    ({'label': ['a', 'b']}, "label: multilabel takes a list of 0/1 columns, "
     "the other heads one column; got ('a', 'b') for the head None"),
    ({'missing_values': '?'}, "missing_values: expected a list of the cells "
     "a number column reads as missing (e.g. [\"?\"]), got '?'"),
    ({'colums': {}}, 'colums: unknown key; the keys: columns, crosses, head, '
     'label, label_vocabulary, missing_values, name, weight'),
    ({'label': None}, 'label: expected a column name (multilabel: a list of '
     'them), got None'),
])
def test_bad_spec_is_a_one_line_usage_error_naming_file_and_key(
    tmp_path, change, key_and_message):
  path = tmp_path / 'spec.json'
  path.write_text('{"label": "y" "columns": {}}' if change is None else
                  json.dumps({**_GOOD, **change}))
  with pytest.raises(UsageError) as error:
    spec_lib.read(str(path))
  assert str(error.value) == f'{path}: {key_and_message}'


def test_a_missing_spec_file_is_a_usage_error(tmp_path):
  with pytest.raises(UsageError, match=r'^\S+nothing.json: cannot read the '
                     'feature spec'):
    spec_lib.read(str(tmp_path / 'nothing.json'))


# Inference.


@pytest.mark.parametrize('name, head, num_classes', [
    ('breast_cancer', 'binary', 2), ('wine', 'multiclass', 3),
    ('diabetes', 'regression', 0)])
@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_infer_chooses_the_head_and_normalizes_numbers(
    sklearn_data, name, head, num_classes, file_format):
  spec, lines = infer_lib.infer(sklearn_data[name][file_format], 'target')
  rows = sklearn_data[name][2]
  assert spec.head == head and spec.label == 'target'
  names = [k for k in rows[0] if k != 'target']
  # A tf.Example's features have no order: sorted.
  assert [c.name for c in spec.columns] == (sorted(names) if file_format
                                            else names)
  assert {c.kind for c in spec.columns} == {'float_normalized'}
  assert lines[0] == f'{len(rows)} records in 3 files'
  assert lines[-1] == ('label target: regression (numbers)'
                       if head == 'regression' else
                       f'label target: {head} (integers 0..{num_classes - 1})')


@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_infer_on_census_like_data(census, file_format):
  spec, lines = infer_lib.infer(census[file_format], 'income', 'fnlwgt')
  rows = census[2]
  kinds = {c.name: c.kind for c in spec.columns}
  assert kinds == {'age': 'float_normalized', 'hours': 'float_normalized',
                   'children': 'float_normalized',
                   'education': 'string_categorical',
                   'occupation': 'string_categorical',
                   'user_id': 'string_hashed'}
  distinct_ids = len({row['user_id'] for row in rows})
  assert distinct_ids > 100
  num_bins = {c.name: c.num_bins for c in spec.columns}['user_id']
  assert num_bins == 2 ** int(np.ceil(np.log2(2 * distinct_ids)))
  assert (spec.head, spec.label_vocabulary, spec.weight) == (
      'binary', ('<=50K', '>50K'), 'fnlwgt')
  missing = sum(row['education'] is None for row in rows)
  assert (f'education: string_categorical (5 distinct strings <= 100; '
          f'{missing} of {CENSUS_ROWS} missing)') in lines
  assert (f'user_id: string_hashed, num_bins {num_bins} ({distinct_ids} '
          'distinct strings > 100: a power of 2 about twice that)') in lines
  assert ('label income: binary (2 distinct strings: the label vocabulary, '
          'sorted: <=50K, >50K)') in lines
  # Fewer categories allowed: the 12 occupations are hashed.
  spec, _ = infer_lib.infer(census[file_format], 'income',
                            max_categorical=10)
  assert {c.name: c.num_bins for c in spec.columns}['occupation'] == 32


def test_a_file_two_globs_name_is_read_once(tmp_path):
  """`train.csv,train*.csv` named train.csv twice: the statistics and the
  training counted its records twice (issue 71, item 8)."""
  for name, rows in (('train.csv', 1000), ('train-2.csv', 10)):
    (tmp_path / name).write_text('x,y\n' + ''.join(
        f'{i},{i % 2}\n' for i in range(rows)))
  patterns = f'{tmp_path}/train.csv,{tmp_path}/train*.csv'
  files = [str(tmp_path / 'train-2.csv'), str(tmp_path / 'train.csv')]
  assert sources.glob_files(patterns) == files
  _, lines = infer_lib.infer(patterns, 'y')
  assert lines[0] == '1010 records in 2 files'
  _, lines = infer_lib.infer(files + files[1:], 'y')
  assert lines[0] == '1010 records in 2 files'
  spec = FeatureSpec((Column('x', 'float_normalized'),), 'y', head='binary')
  source = source_lib.TabularSource({TRAIN: patterns, TEST: patterns}, spec)
  assert source.files(TRAIN) == files
  assert source.num_examples(TRAIN) == 1010


def test_infer_multilabel_and_a_given_head(tmp_path, census):
  rows = [{'x': float(i), 'a': i % 2, 'b': int(i % 3 == 0), 'c': 3 - i % 4}
          for i in range(40)]
  pattern = _write(tmp_path, 'multi', rows, (40,), ['x', 'a', 'b', 'c'])[0]
  spec, lines = infer_lib.infer(pattern, ('a', 'b'))
  assert (spec.label, spec.head, [c.name for c in spec.columns]) == (
      ('a', 'b'), 'multilabel', ['x', 'c'])
  assert lines[-1] == 'label a, b: multilabel (2 label columns)'
  spec, lines = infer_lib.infer(pattern, 'c')  # Class ids 0..3.
  assert (spec.head, lines[-1]) == ('multiclass',
                                    'label c: multiclass (integers 0..3)')
  spec, lines = infer_lib.infer(pattern, 'c', head='regression')
  assert (spec.head, lines[-1]) == ('regression', 'label c: regression')
  with pytest.raises(DataError) as error:
    infer_lib.infer(pattern, ('a', 'c'))
  assert str(error.value) == (f"{tmp_path}/multi-0.csv line 2, column 'c': "
                              "label '3' is not 0 or 1 (the multilabel head)")
  spec, _ = infer_lib.infer(census[0], 'income', head='multiclass')
  assert (spec.head, spec.label_vocabulary) == ('multiclass',
                                                ('<=50K', '>50K'))


def test_infer_reads_integers_as_numbers_unless_named_as_ids(tmp_path):
  """Issue 72, item 1: integers of at most 10 values were codes
  (integer_categorical), so survey levels lost their order (caravan: AUC
  0.726 where LogisticRegression on the numbers has 0.761), and integers
  named as ids of more values were numbers."""
  rng = np.random.default_rng(0)
  rows = [{'level': int(rng.integers(0, 10)), 'flag': int(rng.integers(0, 2)),
           'store_id': int(rng.integers(0, 4)),
           'StoreID': int(rng.integers(0, 300)),
           'zip code': int(rng.integers(10000, 10040)),
           'paid': int(rng.integers(0, 5)),
           'y': float(rng.normal())} for _ in range(400)]
  csv_files, tfrecords = _write(tmp_path, 'levels', rows, (400,), list(rows[0]))
  for files in (csv_files, tfrecords):
    spec, lines = infer_lib.infer(files, 'y')
    kinds = {c.name: c.kind for c in spec.columns}
    assert kinds == {'level': 'float_normalized', 'flag': 'float_normalized',
                     'store_id': 'integer_categorical',
                     'StoreID': 'integer_hashed',
                     'zip code': 'integer_categorical',
                     'paid': 'float_normalized'}
  assert 'level: float_normalized (10 distinct integers: numbers)' in lines
  assert ('store_id: integer_categorical (4 distinct integers named as ids '
          '<= 100)') in lines
  distinct = len({row['StoreID'] for row in rows})  # 221: > 100.
  bins = 2 ** int(np.ceil(np.log2(2 * distinct)))
  assert {c.name: c for c in spec.columns}['StoreID'].num_bins == bins
  assert (f'StoreID: integer_hashed, num_bins {bins} ({distinct} distinct '
          'integers named as ids > 100: a power of 2 about twice that)'
          ) in lines


def test_infer_reads_integers_codes_and_labels_as_a_person_would(tmp_path):
  """Issue 45: integers were never numbers (a weight in lbs hashed into 1024
  bins), zip codes lost their leading zeros, a 1/2 label was a
  regression."""
  rng = np.random.default_rng(0)
  rows = [{'weight_lbs': int(rng.integers(1600, 5200)),
           'cylinders': int(rng.choice([4, 6, 8])),
           'zip': rng.choice(['02134', '2134', '10001']),
           'plant': 'A',  # One value: carries nothing.
           'empty': None,
           'price': float(rng.normal()),
           'y': int(rng.integers(1, 3))} for _ in range(60)]
  header = list(rows[0])
  csv_files, tfrecords = _write(tmp_path, 'cars', rows, (60,), header)
  spec, lines = infer_lib.infer(csv_files, 'y')
  kinds = {c.name: (c.kind, c.dtype) for c in spec.columns}
  assert kinds == {'weight_lbs': ('float_normalized', 'float32'),
                   'cylinders': ('float_normalized', 'float32'),
                   'zip': ('string_categorical', 'string'),
                   'price': ('float_normalized', 'float32')}
  distinct = len({row['weight_lbs'] for row in rows})
  assert (f'weight_lbs: float_normalized ({distinct} distinct integers: '
          'numbers)') in lines
  assert 'cylinders: float_normalized (3 distinct integers: numbers)' in lines
  assert ('zip: string_categorical (3 distinct strings (numbers with '
          'leading zeros: codes) <= 100)') in lines
  assert "plant: left out: one value ('A') in every record" in lines
  assert 'empty: left out: no values (an empty cell everywhere)' in lines
  assert (spec.head, spec.label_vocabulary, lines[-1]) == (
      'binary', ('1', '2'), 'label y: binary (2 distinct integers, not '
      '0..K-1: the label vocabulary, sorted: 1, 2)')
  # The label's classes read back: '1' is class 0, '2' class 1.
  source = source_lib.TabularSource({TRAIN: csv_files, TEST: csv_files},
                                    spec)
  labels = source.columns(TRAIN)['y']
  assert sorted(set(labels.tolist())) == ['1', '2']
  # TFRecords: integers of an int64_list are numbers read as int64.
  spec, lines = infer_lib.infer(tfrecords, 'price')
  column = {c.name: c for c in spec.columns}['weight_lbs']
  assert (column.kind, column.dtype) == ('float_normalized', 'int64')
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec
  values = source_lib.TabularSource(
      {TRAIN: tfrecords, TEST: tfrecords}, spec).columns(TRAIN)['weight_lbs']
  assert values.tolist() == [row['weight_lbs'] for row in rows]
  # A TFRecord label of integers other than 0..K-1 cannot take a
  # vocabulary: said, not guessed.
  with pytest.raises(DataError, match=r"the label 'y' has the integers 1, 2, "
                     'not class ids 0..K-1'):
    infer_lib.infer(tfrecords, 'y')


def _run_infer(*args):
  # From this checkout's root: `-m` imports the package of the tested code.
  return warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.tabular.infer', *args], 120,
      cwd=pathlib.Path(__file__).resolve().parents[1])


# The command's printing and exit codes; infer_lib.infer on the same data
# runs on both stacks (test_infer_on_census_like_data).
@pytest.mark.default_stack_only
@pytest.mark.slow
def test_infer_command_writes_the_spec_and_prints_its_choices(
    census, tmp_path):
  output = tmp_path / 'spec.json'
  result = _run_infer(f'--train_files={census[0]}', '--label=income',
                      '--weight=fnlwgt', f'--output={output}')
  assert result.returncode == 0, result.stderr
  spec, lines = infer_lib.infer(census[0], 'income', 'fnlwgt')
  assert result.stdout.splitlines() == lines + [f'wrote {output}']
  assert spec_lib.read(str(output)) == spec
  # A column the data lacks: the usage error (of --label) the command
  # reports as one line, exit 2 (errors.reported, as test_run.py's process
  # shows), read here without a process of its own.
  with pytest.raises(UsageError) as error:
    infer_lib.infer(census[0], 'salary')
  assert str(error.value) == (
      f'{census[0].replace("*", "0")}: no column \'salary\' (--label names '
      'it); its columns: age, hours, children, education, occupation, '
      'user_id, income, fnlwgt')
  # A usage error: one line, exit 2, nothing written.
  missing = tmp_path / 'missing.json'
  result = _run_infer(f'--train_files={census[0]}', f'--output={missing}')
  assert (result.returncode, result.stderr.splitlines()[-1:]) == (
      2, ['error: --label is required'])
  assert not missing.exists()


# Reading.


@pytest.mark.parametrize('name', ['breast_cancer', 'wine', 'diabetes'])
@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_sklearn_data_reads_whole_and_parses_alike(
    sklearn_data, name, file_format):
  pattern, rows = sklearn_data[name][file_format], sklearn_data[name][2]
  spec, _ = infer_lib.infer(pattern, 'target')
  source = _source(pattern, spec)
  assert source.num_examples(TRAIN) == len(rows)
  columns = source.columns(TRAIN)
  first = spec.columns[0].name
  np.testing.assert_allclose(columns[first], [r[first] for r in rows],
                             rtol=1e-6)
  np.testing.assert_allclose(columns['target'], [r['target'] for r in rows],
                             rtol=1e-6)
  raw, label, weight = source.parse(
      tf.constant(list(source.records(TEST).as_numpy_iterator())))
  assert weight is None and label.dtype == (
      tf.float32 if name == 'diabetes' else tf.int64)
  np.testing.assert_array_equal(label.numpy(), columns['target'])
  for column in spec.columns:
    np.testing.assert_array_equal(raw[column.name].numpy(),
                                  columns[column.name])


@pytest.mark.parametrize('file_format, fast', [(0, True), (1, True),
                                               (1, False)],
                         ids=['csv', 'tfrecord', 'tfrecord-read-in-python'])
def test_census_missing_values_get_their_defaults(
    census, file_format, fast, monkeypatch):
  source = _source(census[file_format], CENSUS_SPEC)
  if not fast:  # As when a value is bad: tf.Examples read in Python.
    monkeypatch.setattr(numpy_columns, '_parsed',
                        lambda source, records: None)
  rows = census[2]
  assert source.num_examples(TRAIN) == CENSUS_ROWS
  assert str(source) == (
      f'{["CSV", "TFRecord"][file_format]} files {census[file_format]} / '
      f'{census[file_format]}')
  columns = source.columns(TRAIN)
  raw, label, weight = source.parse(tf.constant(list(
      source.records(TRAIN).as_numpy_iterator())))
  for column in CENSUS_SPEC.columns:
    expected = _expected(rows, column)
    parsed = raw[column.name].numpy()
    if column.dtype == 'string':
      parsed = [v.decode() for v in parsed]
      assert list(columns[column.name]) == expected == parsed
    else:
      np.testing.assert_allclose(columns[column.name], expected, rtol=1e-6)
      np.testing.assert_allclose(parsed, expected, rtol=1e-6)
  assert (sum(v == 'unknown' for v in columns['education']) ==
          sum(row['education'] is None for row in rows) > 0)
  assert (-1 in columns['children']) and not np.isnan(columns['age']).any()
  assert list(columns['income']) == [r['income'] for r in rows] == [
      v.decode() for v in label.numpy()]
  np.testing.assert_allclose(weight.numpy(), [r['fnlwgt'] for r in rows],
                             rtol=1e-6)
  np.testing.assert_array_equal(columns['fnlwgt'], weight.numpy())


@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_padding_record_parses_to_the_defaults_and_weight_zero(
    census, file_format):
  source = _source(census[file_format], CENSUS_SPEC)
  raw, label, weight = source.parse(tf.constant([source.padding_record] * 2))

  def comparable(values):  # A missing number is NaN, never equal to itself.
    return ['nan' if isinstance(v, float) and np.isnan(v) else v
            for v in values]

  assert {k: comparable(v.numpy().tolist()) for k, v in raw.items()} == {
      c.name: comparable([parsing.feature_default(c)] * 2)
      for c in CENSUS_SPEC.columns
  } | {'education': [b'unknown'] * 2, 'occupation': [b''] * 2,
       'user_id': [b''] * 2}
  assert comparable([parsing.feature_default(c) for c in CENSUS_SPEC.columns
                     if c.name == 'hours']) == ['nan']
  assert label.numpy().tolist() == [b'<=50K'] * 2
  assert weight.numpy().tolist() == [0.0, 0.0]


def test_a_given_head_replaces_the_specs(sklearn_data):
  """--head=regression on integer labels: float32 labels."""
  pattern, rows = sklearn_data['wine'][0], sklearn_data['wine'][2]
  spec, _ = infer_lib.infer(pattern, 'target')
  source = source_lib.TabularSource({TRAIN: pattern, TEST: pattern}, spec,
                                    head='regression')
  assert source.feature_spec.head == 'regression' != spec.head
  _, label, _ = source.parse(tf.constant(list(
      source.records(TRAIN).take(3).as_numpy_iterator())))
  assert label.dtype == tf.float32
  assert label.numpy().tolist() == [r['target'] for r in rows[:3]]
  with pytest.raises(UsageError) as error:
    source_lib.TabularSource({TRAIN: pattern, TEST: pattern}, spec,
                             head='multilabel')
  assert str(error.value) == (
      "--head=multilabel with the feature spec: label: multilabel takes a "
      "list of 0/1 columns, the other heads one column; got 'target' for the "
      'head multilabel')


def test_parse_examples_serves_raw_features(census):
  """The serving parse of tf.Examples gives what training's parse gives,
  whatever the training files' format; no label needed."""
  csv_source = _source(census[0], CENSUS_SPEC)
  records = list(_source(census[1], CENSUS_SPEC).records(TRAIN).take(
      20).as_numpy_iterator())
  served = csv_source.parse_examples(tf.constant(records))
  raw, _, _ = csv_source.parse(tf.constant(list(
      csv_source.records(TRAIN).take(20).as_numpy_iterator())))
  assert set(served) == set(raw)
  for name in raw:
    np.testing.assert_array_equal(served[name].numpy(), raw[name].numpy())


@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_parse_works_inside_a_v1_graph_and_counts_there(census, file_format):
  """Estimator calls input_fn in a graph of its own: counting, sharding and
  parsing work there."""
  source = _source(census[file_format], CENSUS_SPEC)
  with tf.Graph().as_default():
    batch = source.records(TRAIN, 3, 2).batch(100).map(source.parse)
    raw, label, weight = tf.compat.v1.data.make_one_shot_iterator(
        batch).get_next()
    with tf.compat.v1.Session() as session:
      ages, labels, weights = session.run((raw['age'], label, weight))
  assert len(ages) == len(labels) == len(weights) == CENSUS_ROWS // 3


def _numbers(source, split, num_shards, index):
  """The hours values (distinct per row) of one shard, in order."""
  return [float(x) for x in source.parse(tf.constant(list(
      source.records(split, num_shards, index).as_numpy_iterator())))[0][
          'hours'].numpy()]


@pytest.mark.parametrize('sizes, num_shards, whole_files', [
    ((100, 80, 60), 2, False), ((100, 80, 60), 3, False),
    ((60, 60, 60, 60), 2, True), ((50, 50, 49), 3, True)])
@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_shards_hold_every_record_once_and_as_many_within_one(
    tmp_path, sizes, num_shards, whole_files, file_format):
  rows = _census_rows(sum(sizes), seed=1)
  pattern = _write(tmp_path, 'census', rows, sizes, CENSUS_HEADER)[
      file_format]
  source = _source(pattern, CENSUS_SPEC)
  every = [float(np.float32(r['hours'])) for r in rows]
  assert len(set(every)) == len(every)
  starts = np.cumsum((0,) + sizes)
  for split in (TRAIN, TEST):
    shards = [_numbers(source, split, num_shards, i)
              for i in range(num_shards)]
    assert sorted(sum(shards, [])) == sorted(every)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    if split == TRAIN and whole_files:  # Pipeline i reads files i, i + n...
      for i, shard in enumerate(shards):
        assert shard == [every[n] for f in range(i, len(sizes), num_shards)
                         for n in range(starts[f], starts[f + 1])]
    else:
      assert shards == [every[i::num_shards] for i in range(num_shards)]


def test_gzipped_files_and_multilabel(tmp_path):
  rows = [{'x': float(i), 'cat': f'c{i % 3}', 'a': i % 2, 'b': (i // 2) % 2}
          for i in range(30)]
  spec = FeatureSpec((Column('x', 'float'),
                      Column('cat', 'string_categorical')), ('a', 'b'),
                     head='multilabel')
  csv_glob, tfrecord_glob = _write(tmp_path, 'multi', rows, (30,),
                                   ['x', 'cat', 'a', 'b'])
  for path in (csv_glob.replace('*', '0'), tfrecord_glob.replace('*', '0')):
    with open(path, 'rb') as f, open(path + '.gz', 'wb') as g:
      g.write(gzip.compress(f.read()))
  with pytest.raises(DataError) as error:
    _source(f'{csv_glob}*', spec).num_examples(TRAIN)
  assert str(error.value) == (
      f"{csv_glob.replace('*', '0')}.gz is gzipped but "
      f"{csv_glob.replace('*', '0')} is not: the files of a split must be all "
      'gzipped (.gz) or none')
  expected = np.array([[r['a'], r['b']] for r in rows], np.float32)
  for pattern in (f'{csv_glob}.gz', f'{tfrecord_glob}.gz'):
    source = _source(pattern, spec)
    assert source.num_examples(TRAIN) == 30
    np.testing.assert_array_equal(source.columns(TRAIN)[('a', 'b')],
                                  expected)
    _, label, _ = source.parse(tf.constant(list(
        source.records(TRAIN).as_numpy_iterator())))
    assert label.dtype == tf.float32
    np.testing.assert_array_equal(label.numpy(), expected)


# Bad data: one line naming the file, the line or record, the column and
# the value.


def _rewrite_csv(path, line, column, value):
  lines = path.read_text().splitlines()
  header = lines[0].split(',')
  cells = next(csv.reader([lines[line - 1]]))
  cells[header.index(column)] = value
  lines[line - 1] = ','.join(cells)
  path.write_text('\n'.join(lines) + '\n')


def _rewrite_example(path, record, column, feature):
  examples = [tf.train.Example.FromString(r) for r in
              tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]
  features = examples[record - 1].features.feature
  if feature is None:
    del features[column]
  else:
    features[column].CopyFrom(feature)
  with tf.io.TFRecordWriter(str(path)) as w:
    for example in examples:
      w.write(example.SerializeToString())


_COLUMNS = ('age, hours, children, education, occupation, user_id, income, '
            'fnlwgt')


@pytest.mark.parametrize('file_format, change, where, message', [
    ('csv', ('age', 'abc'), 'line 17', "column 'age': 'abc' is not a number "
     '(--unreadable_as_missing reads such cells as missing)'),
    ('csv', ('age', 'inf'), 'line 17',
     "column 'age': 'inf' is not a finite number"),
    ('csv', ('children', '1.5'), 'line 17',
     "column 'children': '1.5' is not an integer (--unreadable_as_missing "
     'reads such cells as missing)'),
    ('csv', ('income', 'maybe'), 'line 17', "column 'income': label 'maybe' "
     'is not in the label vocabulary (<=50K, >50K)'),
    ('csv', ('income', ''), 'line 17',
     "column 'income': no label (an empty cell); --skip_rows_without_label "
     'leaves such records out'),
    ('csv', ('fnlwgt', '-1'), 'line 17', "column 'fnlwgt': weight '-1' is "
     'negative'),
    ('tfrecord', ('age', 'abc'), 'record 16',
     "column 'age': 'abc' is not a number"),
    ('tfrecord', ('children', 2.5), 'record 16',
     "column 'children': 2.5 is in a float_list where the column needs a "
     'int64_list'),
    ('tfrecord', ('income', 'maybe'), 'record 16', "column 'income': label "
     "'maybe' is not in the label vocabulary (<=50K, >50K)"),
    ('tfrecord', ('income', None), 'record 16',
     "column 'income': no label (no such feature); "
     '--skip_rows_without_label leaves such records out'),
    ('tfrecord', ('age', float('nan')), 'record 16',
     "column 'age': nan is not a finite number"),
])
def test_bad_values_fail_as_one_line(tmp_path, file_format, change, where,
                                     message):
  csv_glob, tfrecord_glob = _write(tmp_path, 'census', _census_rows(60),
                                   (30, 30), CENSUS_HEADER)
  column, value = change
  if file_format == 'csv':
    path = tmp_path / 'census-1.csv'
    _rewrite_csv(path, 17, column, value)
  else:
    path = tmp_path / 'census-1.tfrecord'
    _rewrite_example(path, 16, column,
                     None if value is None else _feature(value))
  source = _source(csv_glob if file_format == 'csv' else tfrecord_glob,
                   CENSUS_SPEC)
  assert source.num_examples(TRAIN) == 60
  with pytest.raises(DataError) as error:
    source.columns(TRAIN)
  assert str(error.value) == f'{path} {where}, {message}'


def test_a_column_the_data_lacks_fails_as_one_line(census, tmp_path):
  spec = FeatureSpec(CENSUS_SPEC.columns + (Column('race', 'string_hashed',
                                                   num_bins=8),),
                     'income', label_vocabulary=('<=50K', '>50K'))
  with pytest.raises(DataError) as error:
    _source(census[0], spec).num_examples(TRAIN)
  assert str(error.value) == (
      f"{census[0].replace('*', '0')}: no column 'race' (the feature spec "
      f'names it); its columns: {_COLUMNS}')
  with pytest.raises(DataError) as error:
    _source(census[1], spec).records(TRAIN)
  assert str(error.value) == (
      f"{census[1].replace('*', '0')}: no column 'race' in its first 100 "
      'records (the feature spec names it); its columns: age, children, '
      'education, fnlwgt, hours, income, occupation, user_id')


def test_bad_files_fail_as_one_line(tmp_path, census):
  (tmp_path / 'short.csv').write_text(','.join(CENSUS_HEADER) + '\n1,2\n')
  source = _source(str(tmp_path / 'short.csv'), CENSUS_SPEC)
  assert source.num_examples(TRAIN) == 1
  with pytest.raises(DataError) as error:
    source.columns(TRAIN)
  assert str(error.value) == (f'{tmp_path}/short.csv line 2: 2 fields, but '
                              'its header has 8')
  with pytest.raises(DataError) as error:
    _source(census[0], CENSUS_SPEC, census[1]).num_examples(TEST)
  assert str(error.value) == (
      f"{census[0].replace('*', '0')} is CSV but "
      f"{census[1].replace('*', '0')} is not: the files of both splits must "
      'be all CSV (.csv, .csv.gz) or all TFRecords')
  (tmp_path / 'moved.csv').write_text('income,' + ','.join(
      CENSUS_HEADER[:-2] + CENSUS_HEADER[-1:]) + '\n')
  with pytest.raises(DataError) as error:
    _source(f"{census[0]},{tmp_path / 'moved.csv'}",
            CENSUS_SPEC).num_examples(TRAIN)
  assert str(error.value) == (
      f"{tmp_path}/moved.csv: column 'age' is its column 2 but column 1 of "
      f"{census[0].replace('*', '0')}; every CSV file needs the feature "
      "spec's columns at the same places")
  (tmp_path / 'empty.csv').write_text('')
  with pytest.raises(DataError) as error:
    _source(str(tmp_path / 'empty.csv'), CENSUS_SPEC).num_examples(TRAIN)
  assert str(error.value) == (f'{tmp_path}/empty.csv: no header row (a CSV '
                              'file starts with the column names)')
  (tmp_path / 'x.tfrecord').write_bytes(b'not a record')
  with pytest.raises(DataError) as error:
    _source(str(tmp_path / 'x.tfrecord'), CENSUS_SPEC).num_examples(TRAIN)
  assert str(error.value).startswith(f'{tmp_path}/x.tfrecord: ')
  assert '\n' not in str(error.value)


def test_csv_line_ends_and_empty_lines_count_as_they_read(tmp_path):
  """CRLF line ends and empty lines (inside and at the end): counted, read
  by records() and by columns() alike."""
  path = tmp_path / 'crlf.csv'
  path.write_bytes(b'x,cat,y\r\n1.5,"a,b",0\r\n\r\n2.5,c,1\r\n\n3.5,,1\r\n\r\n')
  spec = FeatureSpec((Column('x', 'float'),
                      Column('cat', 'string_categorical')), 'y')
  source = _source(str(path), spec)
  assert source.num_examples(TRAIN) == 3
  raw, label, _ = source.parse(tf.constant(list(
      source.records(TRAIN).as_numpy_iterator())))
  columns = source.columns(TRAIN)
  assert raw['x'].numpy().tolist() == columns['x'].tolist() == [1.5, 2.5, 3.5]
  assert [v.decode() for v in raw['cat'].numpy()] == list(columns['cat']) == [
      'a,b', 'c', '']
  assert label.numpy().tolist() == columns['y'].tolist() == [0, 1, 1]
  path.write_text('x,cat,y\n1.5,"a"b,0\n')
  with pytest.raises(DataError) as error:
    source.columns(TRAIN)
  assert str(error.value) == f'{path} line 2: \',\' expected after \'"\''
  path.write_text('x,cat,y\n1.5,"a""b",0\n2.5,a"b,1\n')
  with pytest.raises(DataError) as error:
    source.columns(TRAIN)
  assert str(error.value) == (f'{path} line 3: a quote in a field not in '
                              'quotes (write "a""b" for a"b)')
  path.write_text('x,cat,y\n1.5,"a\nb",0\n')
  with pytest.raises(DataError) as error:
    source.columns(TRAIN)
  assert str(error.value) == (f'{path} line 2: a quoted field goes on to the '
                              'next line; a record is one line')


def test_signature_keys_are_the_names_tensorflow_2_takes():
  """A TF2 SavedModel's signature input keys: the column's name where
  tf.saved_model.save takes it, else a deterministic one."""
  keys = {name: dataset_lib.signature_key(name) for name in (
      'age', 'hours_per_week', 'mean radius', 'x-1', 'a.b', 'größe', '1st',
      '_id')}
  assert keys == {'age': 'age', 'hours_per_week': 'hours_per_week',
                  'mean radius': 'mean_radius', 'x-1': 'x_1', 'a.b': 'a_b',
                  'größe': 'gr__e', '1st': 'arg_1st', '_id': 'arg__id'}


def test_columns_of_one_signature_key_are_a_usage_error():
  spec = FeatureSpec((Column('a.b', 'float'), Column('a-b', 'float')), 'y')
  with pytest.raises(UsageError, match=r"columns 'a.b' and 'a-b' have the "
                     r"same serving input name 'a_b'"):
    dataset_lib.Serving(None, spec, None, 'regression')


@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
def test_a_held_out_split_is_the_same_records_however_read(tmp_path,
                                                           file_format):
  """Issue 45, item 9: without evaluation files, eval_fraction of the
  training records are the test split and no training record: counted,
  sharded (2 and 3 pipelines), parsed, read whole for the statistics and
  for another order of the same files, always the same records."""
  sizes = (100, 80, 60)
  rows = _census_rows(sum(sizes), seed=1)
  pattern = _write(tmp_path, 'census', rows, sizes, CENSUS_HEADER)[
      file_format]
  source = source_lib.TabularSource({TRAIN: pattern, TEST: None},
                                    CENSUS_SPEC, eval_fraction=0.25)
  every = sorted(float(np.float32(r['hours'])) for r in rows)
  splits = {}
  for split in (TRAIN, TEST):
    whole = sorted(_numbers(source, split, 1, 0))
    assert len(whole) == source.num_examples(split)
    assert sorted(source.columns(split)['hours'].tolist()) == whole
    for num_shards in (2, 3):
      shards = [_numbers(source, split, num_shards, i)
                for i in range(num_shards)]
      assert sorted(sum(shards, [])) == whole
      assert max(map(len, shards)) - min(map(len, shards)) <= 1
    splits[split] = whole
  assert sorted(splits[TRAIN] + splits[TEST]) == every
  assert 40 <= len(splits[TEST]) <= 80  # A quarter of 240, by hash.
  # The same records in other files, in another order: the same split.
  other = _write(tmp_path, 'reversed', rows[::-1], (240,), CENSUS_HEADER)[
      file_format]
  reversed_source = source_lib.TabularSource(
      {TRAIN: other, TEST: None}, CENSUS_SPEC, eval_fraction=0.25)
  assert sorted(_numbers(reversed_source, TEST, 1, 0)) == splits[TEST]
  assert 'held out for evaluation' in str(source)


@pytest.mark.parametrize('file_format', [0, 1], ids=['csv', 'tfrecord'])
@pytest.mark.parametrize('eval_fraction', [None, 0.25])
def test_records_without_a_label_fail_or_are_left_out(tmp_path, file_format,
                                                      eval_fraction):
  """Issue 47, item 8: a record whose label is missing (an empty cell, an
  absent feature) fails as one line naming it and the flag; with
  skip_unlabeled it is in no split, counted, sharded or read whole."""
  rows = _census_rows(120, seed=2)
  unlabeled = {3, 50, 51, 119}
  for i in unlabeled:
    rows[i]['income'] = None
  pattern = _write(tmp_path, 'census', rows, (60, 60), CENSUS_HEADER)[
      file_format]
  patterns = {TRAIN: pattern, TEST: None if eval_fraction else pattern}
  with pytest.raises(DataError, match=(
      r"census-0\.\w+ (line|record) \d+, column 'income': no label .*"
      '--skip_rows_without_label leaves such records out')):
    source_lib.TabularSource(patterns, CENSUS_SPEC,
                             eval_fraction=eval_fraction).columns(TRAIN)
  source = source_lib.TabularSource(patterns, CENSUS_SPEC,
                                    eval_fraction=eval_fraction,
                                    skip_unlabeled=True)
  labeled = sorted(float(np.float32(r['hours'])) for i, r in enumerate(rows)
                   if i not in unlabeled)
  read = []
  for split in (TRAIN, TEST):
    whole = sorted(_numbers(source, split, 1, 0))
    assert len(whole) == source.num_examples(split)
    assert sorted(source.columns(split)['hours'].tolist()) == whole
    shards = [_numbers(source, split, 2, i) for i in range(2)]
    assert sorted(sum(shards, [])) == whole
    read.append(whole)
    assert source.unlabeled(split) == len(unlabeled)
  if eval_fraction:
    assert sorted(read[0] + read[1]) == labeled
  else:
    assert read[0] == read[1] == labeled


@pytest.mark.both_stacks
def test_infer_prints_no_error_level_line_of_tensorflow(tmp_path):
  """`tabular.infer` as a cold process, on a machine without a GPU: no
  error-level line of TensorFlow's GPU probe (TensorFlow 2.21 probes on
  first use, not on import: `E0000 ... failed call to cuInit`; issue 76,
  item 5)."""
  data = tmp_path / 'data.csv'
  data.write_text('a,y\n' + ''.join(f'{i},{i % 2}\n' for i in range(20)))
  result = subprocess.run(
      [sys.executable, '-m', 'estimator_trainer.tabular.infer',
       f'--train_files={data}', '--label=y', f'--output={tmp_path}/s.json'],
      capture_output=True, text=True, timeout=300, check=False,
      cwd=pathlib.Path(__file__).resolve().parents[1])
  assert result.returncode == 0, result.stderr[-3000:]
  assert not re.findall(r'^E\d{4} .*|.*cuInit.*', result.stderr, re.M), (
      result.stderr[-3000:])


# What infer's sample of --max_rows records misses (issue 71, item 4).


def _rows_csv(path, header, rows):
  path.write_text('\n'.join(','.join(map(str, row))
                            for row in [header, *rows]) + '\n')
  return str(path)


def test_infer_keeps_a_column_empty_in_its_sample_from_the_records_after(
    tmp_path):
  """A column with no value in the first --max_rows records but values
  after: its kind from those (once left out), the line saying so; one
  empty everywhere is left out, saying how many records had none."""
  rows = [(i, '' if i < 8 else f'{i}.25', '', 'a' if i % 2 else 'b')
          for i in range(20)]
  path = _rows_csv(tmp_path / 'late.csv', ('x', 'late', 'never', 'y'), rows)
  spec, lines = infer_lib.infer(path, 'y', max_rows=5)
  assert [(c.name, c.kind) for c in spec.columns] == [
      ('x', 'float_normalized'), ('late', 'float_normalized')], lines
  assert (f'late: no values in the first 5 records, so from the 5 values '
          f'after (the first: {path} line 10): float_normalized (numbers)'
          ) in lines
  assert 'never: left out: no values (an empty cell in all 20 records)' in lines


def test_infer_reads_every_class_of_a_label_its_sample_saw_one_of(tmp_path):
  """A file sorted by class: the sample's one class was an error; the
  classes are those of all the records."""
  rows = [(i, 'no' if i < 12 else 'yes') for i in range(20)]
  path = _rows_csv(tmp_path / 'sorted.csv', ('x', 'y'), rows)
  spec, lines = infer_lib.infer(path, 'y', max_rows=5)
  assert (spec.head, spec.label_vocabulary) == ('binary', ('no', 'yes'))
  assert lines[-1] == ('label y: binary (2 distinct strings: the label '
                       'vocabulary, sorted: no, yes); one class in the '
                       'first 5 records, these of all')
  path = _rows_csv(tmp_path / 'one.csv', ('x', 'y'), [(i, 'no')
                                                      for i in range(20)])
  with pytest.raises(DataError, match="the label 'y' has one value "
                     r"\('no'\) in every record$"):
    infer_lib.infer(path, 'y', max_rows=5)


def test_infer_of_a_header_only_file_is_one_data_error(tmp_path):
  path = _rows_csv(tmp_path / 'empty.csv', ('x', 'y'), [])
  with pytest.raises(DataError) as error:
    infer_lib.infer(path, 'y')
  assert str(error.value) == (f'{path}: no records to infer a spec from (a '
                              'header only)')


def test_infer_keeps_a_mostly_numeric_column_a_number(tmp_path):
  """One word among numbers (at most 5 % of the present cells): a number
  column whose words the run reports; more words: a string column."""
  rows = [(f'{i}.5', i, 'a' if i % 2 else 'b') for i in range(40)]
  rows[3] = ('unknown', 'N/A', 'a')
  for i in (5, 6, 7):  # 3 of 40 in `codes`: 7.5 %.
    rows[i] = (rows[i][0], 'K', rows[i][2])
  path = _rows_csv(tmp_path / 'word.csv', ('income', 'codes', 'y'), rows)
  spec, lines = infer_lib.infer(path, 'y')
  assert [(c.name, c.kind) for c in spec.columns] == [
      ('income', 'float_normalized'), ('codes', 'string_categorical')], lines
  assert lines[1].startswith("income: float_normalized (numbers; 1 of 40 "
                             f"cells not numbers (first 'unknown', {path} "
                             'line 5): the run fails on them')
