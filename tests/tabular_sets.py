"""Small tabular sets for the end-to-end tests (test_tabular_runs.py):
scikit-learn's bundled datasets and the census-like set
(benchmark/census.py), written to CSV and TFRecords of tf.Example with a
weight column and a feature spec each."""

import csv
import dataclasses
import json
import pathlib

import numpy as np
from sklearn import datasets
import tensorflow as tf

from estimator_trainer.benchmark import census


@dataclasses.dataclass(frozen=True)
class Set:
  """A dataset as the CLI takes it: file globs, the feature spec file, and
  the eval split's rows (column -> numpy array) to serve and score."""

  train_files: str
  eval_files: str
  feature_spec: str
  spec: dict
  eval_rows: dict


def _write_csv(path, table):
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(table)
    writer.writerows(zip(*(values.tolist() for values in table.values())))


def _feature(values):
  if values.dtype.kind in 'US':
    return tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[v.encode() for v in values.tolist()]))
  if values.dtype.kind == 'i':
    return tf.train.Feature(int64_list=tf.train.Int64List(
        value=values.tolist()))
  return tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))


def _missing(value):
  return value == '' or (isinstance(value, float) and np.isnan(value))


def examples(table):
  """A serialized tf.Example per row of `table`; a missing cell (NaN, '')
  an absent feature."""
  rows = len(next(iter(table.values())))
  return [tf.train.Example(features=tf.train.Features(feature={
      name: _feature(values[i:i + 1]) for name, values in table.items()
      if not _missing(values[i].item())})).SerializeToString()
          for i in range(rows)]


def _write_tfrecord(path, table):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in examples(table):
      writer.write(record)


def _split(directory, name, table, spec, train_rows, ext):
  """Writes `table`'s first `train_rows` rows to <name>-train.<ext>, the
  others to <name>-eval.<ext>, and the spec to <name>.json."""
  write = _write_csv if ext == 'csv' else _write_tfrecord
  parts = {}
  for split, rows in (('train', slice(train_rows)),
                      ('eval', slice(train_rows, None))):
    parts[split] = {k: v[rows] for k, v in table.items()}
    write(directory / f'{name}-{split}.{ext}', parts[split])
  (directory / f'{name}.json').write_text(json.dumps(spec))
  return Set(str(directory / f'{name}-train.{ext}'),
             str(directory / f'{name}-eval.{ext}'),
             str(directory / f'{name}.json'), spec, parts['eval'])


def _weights(rows, seed):
  return np.random.default_rng(seed).uniform(0.5, 2.0, rows).astype(
      np.float32)


def _floats(names):
  return {name: {'kind': 'float_normalized'} for name in names}


# Column names as users have them: scikit-learn's own (a space), a dash, a
# dot, non-ASCII letters; and `weight` and `padding`, once the input's keys
# of the example weights and the padding (issue 72, item 5), beside the
# weight column `w`.
USERS_NAMES = {'mean_radius': 'mean radius', 'mean_texture': 'x-1',
               'mean_smoothness': 'a.b', 'size': 'größe',
               'worst_concavity': 'weight', 'worst_symmetry': 'padding'}


def _breast_cancer(directory, name='breast_cancer', rename=None):
  """Binary, string labels; a string categorical column; CSV. `rename`:
  column -> the name it gets."""
  bunch = datasets.load_breast_cancer()
  names = [n.replace(' ', '_') for n in bunch.feature_names]
  x = dict(zip(names, bunch.data.T))
  floats = ('mean_radius', 'mean_texture', 'mean_smoothness',
            'worst_concavity', 'worst_symmetry')
  edges = np.quantile(x['mean_area'], [1 / 3, 2 / 3])
  table = {**{n: x[n].astype(np.float32) for n in floats},
           'size': np.array(['small', 'medium', 'large'])[
               np.searchsorted(edges, x['mean_area'])],
           'diagnosis': bunch.target_names[bunch.target],
           'w': _weights(len(bunch.target), 1)}
  columns = {**_floats(floats), 'size': {'kind': 'string_categorical'}}
  rename = rename or {}
  table = {rename.get(k, k): v for k, v in table.items()}
  spec = {'name': name,
          'columns': {rename.get(k, k): v for k, v in columns.items()},
          'label': 'diagnosis',
          'label_vocabulary': bunch.target_names.tolist(),
          'weight': 'w', 'head': 'binary'}
  return _split(directory, name, table, spec, 400, 'csv')


def _wine_table():
  bunch = datasets.load_wine()
  order = np.random.default_rng(0).permutation(len(bunch.target))  # Sorted.
  names = list(bunch.feature_names)
  floats = ('alcohol', 'flavanoids', 'color_intensity', 'proline', 'hue')
  table = {n: bunch.data[order, names.index(n)].astype(np.float32)
           for n in floats}
  table['magnesium'] = bunch.data[order, names.index('magnesium')].astype(
      np.int64)
  return table, floats, bunch.target[order].astype(np.int64)


def _wine(directory):
  """Multiclass, integer labels 0..2; an integer hashed column;
  TFRecords."""
  table, floats, target = _wine_table()
  table.update({'cultivar': target, 'w': _weights(len(target), 2)})
  spec = {'name': 'wine',
          'columns': {**_floats(floats),
                      'magnesium': {'kind': 'integer_hashed',
                                    'num_bins': 16}},
          'label': 'cultivar', 'weight': 'w', 'head': 'multiclass'}
  return _split(directory, 'wine', table, spec, 120, 'tfrecord')


def _wine_multilabel(directory):
  """Multilabel: wine's cultivar one-hot, and whether its alcohol is above
  the median (the alcohol column left out); CSV."""
  table, floats, target = _wine_table()
  alcohol = table.pop('alcohol')
  labels = ('cultivar_0', 'cultivar_1', 'cultivar_2', 'strong')
  table.update({name: (target == i).astype(np.int64)
                for i, name in enumerate(labels[:3])})
  table.update({'strong': (alcohol > np.median(alcohol)).astype(np.int64),
                'w': _weights(len(target), 3)})
  spec = {'name': 'wine_multilabel',
          'columns': {**_floats(floats[1:]),
                      'magnesium': {'kind': 'integer_hashed',
                                    'num_bins': 16}},
          'label': list(labels), 'weight': 'w', 'head': 'multilabel'}
  return _split(directory, 'wine_multilabel', table, spec, 120, 'csv')


def _diabetes(directory):
  """Regression of the progression in hundreds; sex integer categorical;
  CSV."""
  bunch = datasets.load_diabetes(scaled=False)
  names = list(bunch.feature_names)
  floats = ('age', 'bmi', 'bp', 's1', 's5')
  table = {n: bunch.data[:, names.index(n)].astype(np.float32)
           for n in floats}
  table['sex'] = bunch.data[:, names.index('sex')].astype(np.int64)
  table['progression'] = (bunch.target / 100).astype(np.float32)
  table['w'] = _weights(len(bunch.target), 4)
  spec = {'name': 'diabetes',
          'columns': {**_floats(floats),
                      'sex': {'kind': 'integer_categorical'}},
          'label': 'progression', 'weight': 'w', 'head': 'regression'}
  return _split(directory, 'diabetes', table, spec, 300, 'csv')


def write_census(directory):
  """The census-like set alone (_census), written under `directory`."""
  directory.mkdir(parents=True, exist_ok=True)
  return _census(directory, census.WEIGHT)


def _census(directory, weight):
  """The census-like set (benchmark/census.py) with missing values, string
  labels and weights, small: 240 training rows, 60 test rows, as TFRecords
  (missing features absent); the weight column `weight` (`fnlwgt`, or
  `fnlwgt3`: 3 x fnlwgt)."""
  spec = census.feature_spec(weights=True)
  spec['columns'][census.HASHED]['num_bins'] = 1024
  spec['weight'] = weight
  parts = {}
  for split, rows in (('train', 240), ('eval', 60)):
    table, _ = census.generate(rows, split=census.SPLITS[split == 'eval'],
                               missing=0.05, weights=True)
    table['fnlwgt3'] = 3 * table[census.WEIGHT]
    _write_tfrecord(directory / f'census-{split}.tfrecord', table)
    parts[split] = table
  (directory / f'census-{weight}.json').write_text(json.dumps(spec))
  return Set(str(directory / 'census-train.tfrecord'),
             str(directory / 'census-eval.tfrecord'),
             str(directory / f'census-{weight}.json'), spec, parts['eval'])


# The census columns a test of a step reads where the property is not the
# width's: one of each kind the set has (a normalized number, a vocabulary,
# the hashed id), each with missing values and embeddings where ids are.
# The other 11 only add graph to trace (a 2-replica step: 5.3 -> 2.2
# CPU-seconds on ctl, 9.4 -> 4.0 on keras, 2-core AMD EPYC).
CENSUS_COLUMNS = ('age', 'workclass', 'user_id')


def narrowed(data, directory, columns=CENSUS_COLUMNS):
  """`data` read by a spec of `columns` alone, written under `directory`."""
  spec = {**data.spec, 'columns': {name: data.spec['columns'][name]
                                   for name in columns}}
  directory.mkdir(parents=True, exist_ok=True)
  path = directory / pathlib.Path(data.feature_spec).name
  path.write_text(json.dumps(spec))
  return dataclasses.replace(data, feature_spec=str(path), spec=spec)


def write(directory):
  """Writes every set under `directory`; returns name -> Set: one per head
  (binary, multiclass, regression, multilabel), binary's with USERS_NAMES
  (users_names), and the census-like set
  weighted by its weight column and by 3 x it (census, census_tripled)."""
  return {'binary': _breast_cancer(directory),
          'users_names': _breast_cancer(directory, 'users_names',
                                        USERS_NAMES),
          'multiclass': _wine(directory),
          'regression': _diabetes(directory),
          'multilabel': _wine_multilabel(directory),
          'census': _census(directory, census.WEIGHT),
          'census_tripled': _census(directory, 'fnlwgt3')}
