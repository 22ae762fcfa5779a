"""tabular/feature_columns.py: a canned Estimator's feature columns -> the
feature spec, each column's ids the same as canned's (up to the documented
order of out-of-vocabulary ids), given statistics used as given."""

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import encoder as encoder_lib
from estimator_trainer.tabular import feature_columns
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import statistics as statistics_lib

fc = pytest.importorskip('tensorflow.compat.v1').feature_column

# Values in and out of every vocabulary, below, between and on boundaries.
RAW = {
    'age': np.array([25., 33., 71., 18., 50., 40.], np.float32),
    'hours': np.array([5., 10., 19.5, 40., 41., 20.], np.float32),
    'color': np.array(['red', 'blue', 'pink', 'green', 'teal', 'plum'], object),
    'size': np.array([3, 1, 2, 7, 3, 1], np.int64),
    'slot': np.array([0, 4, 2, 1, 3, 9], np.int64),
    'city': np.array(['paris', 'rome', 'oslo', 'x', 'paris', 'y'], object),
    'zone': np.array([11, 3, 11, 5, 8, 9], np.int64),
}


def canned_columns(vocabulary_file):
  """Every kind of column canned users have, as they write them."""
  color = fc.categorical_column_with_vocabulary_list(
      'color', ['red', 'green', 'blue'], num_oov_buckets=2)
  size = fc.categorical_column_with_vocabulary_list('size', [3, 1, 2],
                                                    dtype=tf.int64)
  city = fc.categorical_column_with_vocabulary_file(
      'city', vocabulary_file, vocabulary_size=3)
  return {
      'age': fc.numeric_column('age', default_value=30.0),
      'hours': fc.bucketized_column(fc.numeric_column('hours'),
                                    [10., 20., 40.]),
      'color': color, 'size': size, 'city': city,
      'slot': fc.categorical_column_with_identity('slot', 5),
      'zone': fc.categorical_column_with_hash_bucket('zone', 7,
                                                     dtype=tf.int64),
      'color_X_zone': fc.crossed_column(['color', 'zone'], 13),
      'embedded': fc.embedding_column(color, 4, combiner='sqrtn'),
      'one_hot': fc.indicator_column(size),
  }


@pytest.fixture
def columns(tmp_path):
  path = tmp_path / 'cities.txt'
  path.write_text('rome\nparis\noslo\nnot-in-size\n')
  return canned_columns(str(path))


def canned_id_of(column, raw):
  """canned's id of each example (-1: none), read off its one-hot."""
  indicator = fc.input_layer(
      {k: tf.constant(v) for k, v in raw.items()},
      [fc.indicator_column(column)])
  one_hot = tf.compat.v1.Session().run(indicator) if not (
      tf.executing_eagerly()) else indicator.numpy()
  return np.where(one_hot.sum(axis=1) > 0, one_hot.argmax(axis=1), -1)


def test_every_kind_to_the_spec(columns):
  spec = feature_columns.feature_spec_from_columns(list(columns.values()), 'y', head='binary')
  by_name = {c.name: c for c in spec.columns}
  assert by_name['age'] == spec_lib.Column('age', 'float', default=30.0)
  assert by_name['hours'].boundaries == (10., 20., 40.)
  assert by_name['hours'].num_bins == 4
  assert by_name['color'].vocabulary == ('red', 'green', 'blue')
  assert (by_name['color'].num_oov, by_name['color'].embedding_dim) == (2, 4)
  assert by_name['size'].vocabulary == (3, 1, 2) and by_name['size'].one_hot
  assert by_name['city'].vocabulary == ('rome', 'paris', 'oslo')
  assert by_name['slot'].vocabulary == (0, 1, 2, 3, 4)
  assert (by_name['zone'].kind, by_name['zone'].num_bins) == (
      'integer_hashed', 7)
  assert spec.crosses == (spec_lib.Cross(('color', 'zone'), 13),)
  # The JSON carries the given fields and reads back equal.
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec


def test_ids_as_canned_and_statistics_as_given(columns):
  spec = feature_columns.feature_spec_from_columns(list(columns.values()), 'y', head='binary')
  # Computed from data that would give another vocabulary and boundaries.
  stats = statistics_lib.compute(spec, {**RAW, 'y': np.zeros(6, np.int64)})
  assert stats.columns['color'].vocabulary == ('red', 'green', 'blue')
  assert stats.columns['hours'].boundaries == (10., 20., 40.)
  encoder = encoder_lib.Encoder(spec, stats, labels=False)
  encoded = encoder({k: tf.constant(v) for k, v in RAW.items()})
  for name in ('hours', 'color', 'size', 'slot', 'city', 'zone',
               'color_X_zone'):
    item = next(c for c in spec.columns + spec.crosses if c.name == name)
    cardinality = encoder.inputs[name].cardinality
    rows = feature_columns.canned_ids(item, cardinality)
    ours = [rows[i] for i in encoded[name].numpy()]
    canned = canned_id_of(columns[name], RAW)
    assert ours == canned.tolist(), name


def test_default_value_ids_as_canned():
  """default_value: an unknown value of a vocabulary, an out-of-range id of
  an identity column take its id; a missing one ('', -1) none, as canned."""
  columns = {
      'color': fc.categorical_column_with_vocabulary_list(
          'color', ['red', 'green', 'blue'], default_value=2),
      'size': fc.categorical_column_with_vocabulary_list(
          'size', [3, 1, 2], dtype=tf.int64, default_value=0),
      'slot': fc.categorical_column_with_identity('slot', 5, default_value=3),
  }
  raw = {
      'color': np.array(['red', 'pink', '', 'blue', 'teal', 'green'], object),
      'size': np.array([3, 7, -1, 1, 2, 9], np.int64),
      'slot': np.array([0, 9, -1, 4, -3, 5], np.int64),
  }
  spec = feature_columns.feature_spec_from_columns(
      list(columns.values()), 'y', head='binary')
  assert [c.oov_value for c in spec.columns] == ['blue', 3, 3]
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec
  stats = statistics_lib.compute(spec, {**raw, 'y': np.zeros(6, np.int64)})
  encoder = encoder_lib.Encoder(spec, stats, labels=False)
  encoded = encoder({k: tf.constant(v) for k, v in raw.items()})
  for column in spec.columns:
    rows = feature_columns.canned_ids(
        column, encoder.inputs[column.name].cardinality)
    ours = [rows[i] for i in encoded[column.name].numpy()]
    assert ours == canned_id_of(columns[column.name], raw).tolist(), (
        column.name)


@pytest.mark.parametrize('make, message', [
    (lambda: fc.numeric_column('a', normalizer_fn=lambda x: x / 2),
     "'a': its normalizer_fn .* float_normalized"),
    (lambda: fc.weighted_categorical_column(
        fc.categorical_column_with_identity('w', 3), 'w_weight'),
     "'w_weighted_by_w_weight': a weighted_categorical_column cannot"),
    (lambda: fc.numeric_column('v', shape=(3,)), "'v': shape"),
    (lambda: fc.embedding_column(
        fc.categorical_column_with_identity('e', 3), 2, max_norm=1.0),
     "'e_embedding': max_norm"),
    (lambda: fc.crossed_column(
        [fc.bucketized_column(fc.numeric_column('n'), [1.]), 'k'], 9),
     'crosses of feature columns'),
    (lambda: fc.crossed_column(['a', 'b'], 9),
     "'a_X_b': crosses the raw feature 'a', which no other column reads"),
])
def test_what_cannot_be_carried_is_named(make, message):
  with pytest.raises(UsageError, match=message) as raised:
    feature_columns.feature_spec_from_columns([make()], 'y')
  assert '\n' not in str(raised.value)


def test_one_feature_as_a_number_and_bucketized():
  """numeric_column('age') and a bucketized_column of it (in either order,
  embedded too): 'age' and 'age_bucketized' of source 'age', which reads
  the data's 'age' (no column of its own) into canned's buckets."""
  age = fc.numeric_column('age', default_value=30.0)
  bucketized = fc.bucketized_column(age, [20., 40., 60.])
  found = [feature_columns.feature_spec_from_columns(columns, 'y')
           for columns in ([age, bucketized, fc.embedding_column(
               bucketized, 2)], [fc.embedding_column(bucketized, 2),
                                 bucketized, age])]
  spec = found[0]
  assert {c.name: c for c in spec.columns} == {c.name: c for c in
                                              found[1].columns}
  assert spec.names == ('age', 'y')
  derived = spec.columns[1]
  assert (derived.name, derived.source, derived.embedding_dim) == (
      'age_bucketized', 'age', 2)
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec
  raw = {'age': RAW['age']}
  stats = statistics_lib.compute(spec, {**raw, 'y': np.zeros(6, np.int64)})
  encoded = encoder_lib.Encoder(spec, stats, labels=False)(
      {'age': tf.constant(raw['age'])})
  assert encoded['age'].numpy().ravel().tolist() == raw['age'].tolist()
  assert encoded['age_bucketized'].numpy().tolist() == canned_id_of(
      bucketized, raw).tolist()


def test_a_source_is_checked():
  with pytest.raises(UsageError, match='columns.b.source: no column'):
    spec_lib.from_dict({'columns': {'b': {
        'kind': 'float_discretized', 'boundaries': [1.0], 'source': 'a'}},
                        'label': 'y'})


def test_indicator_column_enters_the_deep_part_one_hot(columns):
  from estimator_trainer.models import tabular as models  # pylint: disable=g-import-not-at-top
  spec = feature_columns.feature_spec_from_columns(
      [columns['one_hot'], columns['age']], 'y', head='binary')
  stats = statistics_lib.compute(spec, {**RAW, 'y': np.zeros(6, np.int64)})
  encoder = encoder_lib.Encoder(spec, stats, labels=False)
  model = models.dnn(encoder.inputs, 1, hidden_units=(2,))
  # 4 ids of size (its oov id, then 3, 1, 2) one-hot, then age.
  assert model.get_layer('dnn/hidden_0').kernel.shape == (5, 2)
  one_hot = model.get_layer('dnn/one_hot_size')(tf.constant([0, 2]))
  assert one_hot.numpy().tolist() == [[1, 0, 0, 0], [0, 0, 1, 0]]


def test_one_oov_bucket_is_canned_trained_bucket():
  """num_oov_buckets=1 (the most common setting): an unknown value is
  canned's out-of-vocabulary id (after the vocabulary), a row it trained,
  not one it drops; of a string and of an integer vocabulary, one-hot as
  wide as canned's indicator."""
  columns = {
      'color': fc.categorical_column_with_vocabulary_list(
          'color', ['red', 'green', 'blue'], num_oov_buckets=1),
      'size': fc.categorical_column_with_vocabulary_list(
          'size', [3, 1, 2], dtype=tf.int64, num_oov_buckets=1),
  }
  spec = feature_columns.feature_spec_from_columns(
      [fc.indicator_column(column) for column in columns.values()], 'y',
      head='binary')
  assert [(c.num_oov, c.one_hot) for c in spec.columns] == [(1, True)] * 2
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec
  raw = {'color': RAW['color'], 'size': RAW['size']}
  stats = statistics_lib.compute(spec, {**raw, 'y': np.zeros(6, np.int64)})
  encoder = encoder_lib.Encoder(spec, stats, labels=False)
  encoded = encoder({k: tf.constant(v) for k, v in raw.items()})
  for name, column in columns.items():
    cardinality = encoder.inputs[name].cardinality
    assert cardinality == 4  # canned's indicator: 3 values, 1 bucket.
    rows = feature_columns.canned_ids(spec.columns[list(columns).index(
        name)], cardinality)
    ours = [rows[i] for i in encoded[name].numpy()]
    canned = canned_id_of(column, raw).tolist()
    assert 3 in canned, name  # An unknown value in canned's bucket.
    assert ours == canned, name


def test_each_part_keeps_its_own_column_of_a_feature():
  """Wide & deep: the wide part's column of a feature (a bare categorical
  column) and the deep part's (an embedding or indicator of another) that
  differ, e.g. a default_value of one part only, are two spec columns,
  each part's alone: the deep one named as canned names it, reading the
  feature; a feature one part takes is that part's alone."""
  wide = fc.categorical_column_with_vocabulary_list(
      'city', ['rome', 'oslo'], default_value=1)
  deep = fc.categorical_column_with_vocabulary_list('city', ['rome', 'oslo'],
                                                    num_oov_buckets=1)
  slot = fc.categorical_column_with_identity('slot', 3)
  color = fc.categorical_column_with_hash_bucket('color', 5)
  # Deep first: the order given does not matter.
  spec = feature_columns.feature_spec_from_columns(
      [fc.embedding_column(deep, 2), fc.embedding_column(color, 2), slot,
       wide, color], 'y')
  by_name = {c.name: c for c in spec.columns}
  assert set(by_name) == {'city', 'city_embedding', 'slot', 'color'}
  assert (by_name['city'].parts, by_name['city'].oov_value,
          by_name['city'].num_oov) == (('linear',), 'oslo', None)
  assert (by_name['city_embedding'].parts, by_name['city_embedding'].source,
          by_name['city_embedding'].oov_value,
          by_name['city_embedding'].num_oov) == (('dnn',), 'city', None, 1)
  assert by_name['slot'].parts == ('linear',)
  assert by_name['color'].parts is None  # Both parts.
  assert set(spec.names) == {'city', 'slot', 'color', 'y'}  # The data's.
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec


@pytest.mark.parametrize('columns, message', [
    # Two columns of one feature in one part: the spec has one a feature.
    (lambda: [fc.numeric_column('age', default_value=30.0),
              fc.numeric_column('age')],
     "'age': default_value 30.0 in one column of it and None"),
    (lambda: [fc.embedding_column(fc.categorical_column_with_vocabulary_list(
        'city', ['rome'], default_value=0), 2), fc.indicator_column(
            fc.categorical_column_with_vocabulary_list('city', ['rome']))],
     "'city': default_value 'rome' in one column of it and None"),
])
def test_two_columns_of_one_feature_in_one_part_must_agree(columns, message):
  with pytest.raises(UsageError, match=message) as raised:
    feature_columns.feature_spec_from_columns(columns(), 'y')
  assert '\n' not in str(raised.value)
