"""A census-like tabular set, generated deterministically (issue 34's
peer benchmark): 5 numbers, 8 string columns of 2-40 values, one string id
of 100,000 values (hashed) and a binary string label, drawn from a fixed
logistic model so that the best possible accuracy is known.

    python scripts/make_census_like.py --output_dir=/tmp/census --rows=200000

writes <output_dir>/{train,test}-0000i-of-0000n.{tfrecord,csv} (tf.Example
records and CSV with a header row, the same rows), `feature_spec.json`
(the package's --feature_spec) and `census.json` (the schema, the train
split's means and variances, the Bayes accuracy). The test split has
rows // 10 rows. Importing this module does not load TensorFlow.
"""

import csv
import json
import os

import numpy as np

from estimator_trainer import outputs

NUMBERS = ('age', 'education_num', 'capital_gain', 'capital_loss',
           'hours_per_week')
# Column -> its number of values (vocabularies '<column>_<i>').
STRINGS = {'workclass': 8, 'education': 16, 'marital_status': 7,
           'occupation': 14, 'relationship': 6, 'race': 5, 'sex': 2,
           'native_country': 40}
HASHED = 'user_id'
HASHED_VALUES = 100_000
HASH_BINS = 100_000
LABEL = 'income'
LABEL_VOCABULARY = ('<=50K', '>50K')
WEIGHT = 'fnlwgt'
FLOATS = (*NUMBERS, WEIGHT)
SPLITS = ('train', 'test')
# How every configuration of the benchmark reads the train split: its
# shuffle buffer (in examples) and seed (of the shuffle and the weights).
SHUFFLE_BUFFER = 10_000
SEED = 0
SCHEMA_FILE = 'census.json'
FEATURE_SPEC_FILE = 'feature_spec.json'


def vocabulary(column):
  return tuple(f'{column}_{i}' for i in range(STRINGS[column]))


def generate(rows, seed=0, split='train', missing=0.0, weights=False):
  """(columns: name -> numpy array, Bayes accuracy). The model's
  coefficients come from `seed` alone; the rows from `seed` and `split`,
  so that the splits are drawn apart from one model.

  For tests: `missing`, the fraction of each feature's cells left empty
  (NaN or ''; drawn after the label, which saw the values); `weights`, a
  positive WEIGHT column. Neither changes the other columns' values."""
  model = np.random.default_rng(seed)
  effects = {name: model.normal(0, 0.7, count)
             for name, count in STRINGS.items()}
  user_effect = model.normal(0, 0.5, HASHED_VALUES)
  rng = np.random.default_rng([seed, SPLITS.index(split)])
  cols = {}
  for name, count in STRINGS.items():
    # Zipf-like frequencies: a few common values, a tail of rare ones.
    p = 1 / np.arange(1, count + 1)
    cols[name] = rng.choice(count, rows, p=p / p.sum())
  cols['age'] = np.clip(np.round(rng.normal(39, 13, rows)), 17, 90)
  cols['education_num'] = cols['education'] + 1.0
  cols['capital_gain'] = np.where(rng.random(rows) < 0.08,
                                  np.round(rng.lognormal(8, 1, rows)), 0.0)
  cols['capital_loss'] = np.where(rng.random(rows) < 0.05,
                                  np.round(rng.normal(1800, 400, rows)), 0.0)
  cols['hours_per_week'] = np.clip(np.round(rng.normal(40, 12, rows)), 1, 99)
  users = rng.integers(0, HASHED_VALUES, rows)
  logit = (-1.9 + 0.05 * (cols['age'] - 39) -
           0.0012 * (cols['age'] - 45) ** 2 +
           0.3 * (cols['education_num'] - 8) +
           1.5 * np.log1p(cols['capital_gain'] / 1000) +
           1.0 * (cols['capital_loss'] > 1500) +
           0.04 * (cols['hours_per_week'] - 40) + user_effect[users] +
           sum(effects[name][cols[name]] for name in STRINGS) +
           # An interaction a linear model misses.
           1.2 * (cols['sex'] == 0) * (cols['marital_status'] == 0))
  probability = 1 / (1 + np.exp(-logit))
  label = rng.random(rows) < probability
  bayes = float(np.mean(np.maximum(probability, 1 - probability)))
  out = {name: cols[name].astype(np.float32) for name in NUMBERS}
  out.update({name: np.array(vocabulary(name))[cols[name]]
              for name in STRINGS})
  out[HASHED] = np.char.add('u', users.astype(str))
  for name, values in out.items():
    if missing:
      values[rng.random(rows) < missing] = np.nan if name in NUMBERS else ''
  out[LABEL] = np.array(LABEL_VOCABULARY)[label.astype(int)]
  if weights:
    out[WEIGHT] = rng.lognormal(0, 0.5, rows).astype(np.float32)
  return out, bayes


def feature_spec(weights=False):
  """The package's feature spec of the set, as JSON data."""
  columns = {name: {'kind': 'float_normalized'} for name in NUMBERS}
  columns.update({name: {'kind': 'string_categorical'} for name in STRINGS})
  columns[HASHED] = {'kind': 'string_hashed', 'num_bins': HASH_BINS}
  spec = {'name': 'census_like', 'columns': columns, 'label': LABEL,
          'label_vocabulary': list(LABEL_VOCABULARY), 'head': 'binary'}
  if weights:
    spec['weight'] = WEIGHT
  return spec


def _shards(cols, num_shards):
  rows = len(cols[LABEL])
  for index in range(num_shards):
    part = slice(index * rows // num_shards, (index + 1) * rows // num_shards)
    yield index, {name: values[part] for name, values in cols.items()}


def _missing(value):
  return value == '' or (isinstance(value, float) and np.isnan(value))


def _write_tfrecord(path, cols):
  """A tf.Example per row; a missing cell's feature left out."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  feature = tf.train.Feature
  rows = zip(*(values.tolist() for values in cols.values()))
  with tf.io.TFRecordWriter(path) as writer:
    for row in rows:
      example = tf.train.Example(features=tf.train.Features(feature={
          name: feature(float_list=tf.train.FloatList(value=[value]))
          if name in FLOATS else
          feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
          for name, value in zip(cols, row) if not _missing(value)}))
      writer.write(example.SerializeToString())


def _write_csv(path, cols):
  """A header row, then a line per row; a missing cell empty."""
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(cols)
    for row in zip(*(values.tolist() for values in cols.values())):
      writer.writerow('' if _missing(value) else value for value in row)


def write(output_dir, rows=200_000, num_shards=4, seed=0, missing=0.0,
          weights=False):
  """Writes both splits in both formats (`missing`, `weights`: see
  `generate`); returns census.json's content. Every file is written under
  a temporary name and renamed when whole."""
  os.makedirs(output_dir, exist_ok=True)
  schema = {'rows': rows, 'seed': seed, 'missing': missing,
            'weight': WEIGHT if weights else None, 'numbers': list(NUMBERS),
            'strings': {name: list(vocabulary(name)) for name in STRINGS},
            'hashed': HASHED, 'hash_bins': HASH_BINS, 'label': LABEL,
            'label_vocabulary': list(LABEL_VOCABULARY)}
  for split, count in (('train', rows), ('test', rows // 10)):
    cols, bayes = generate(count, seed, split, missing, weights)
    schema[f'{split}_bayes_accuracy'] = bayes
    if split == 'train':
      schema['means'] = {n: float(np.nanmean(cols[n])) for n in NUMBERS}
      schema['variances'] = {n: float(np.nanvar(cols[n])) for n in NUMBERS}
      schema['positive_fraction'] = float(
          np.mean(cols[LABEL] == LABEL_VOCABULARY[1]))
    for index, shard in _shards(cols, num_shards):
      for ext, writer in (('tfrecord', _write_tfrecord), ('csv', _write_csv)):
        path = os.path.join(
            output_dir, f'{split}-{index:05d}-of-{num_shards:05d}.{ext}')
        writer(path + '.tmp', shard)
        os.replace(path + '.tmp', path)
  outputs.write_atomic(os.path.join(output_dir, FEATURE_SPEC_FILE),
                       json.dumps(feature_spec(weights), indent=1))
  outputs.write_atomic(os.path.join(output_dir, SCHEMA_FILE),
                       json.dumps(schema, indent=1))
  return schema


def read_schema(data_dir):
  with open(os.path.join(data_dir, SCHEMA_FILE)) as f:
    return json.load(f)


def files(data_dir, split, ext='tfrecord'):
  """The glob of a split's files."""
  return os.path.join(data_dir, f'{split}-*.{ext}')
