"""A canned Estimator's `tf.feature_column`s -> the FeatureSpec of the same
inputs, their meaning kept:

  numeric_column                       float (dtype int64 if it is), its
                                       default_value the column's default
  bucketized_column                    float_discretized, its boundaries
                                       (beside a numeric_column of the
                                       feature: <key>_bucketized, its
                                       source the feature)
  categorical_column_with_vocabulary_  string/integer_categorical, the
    list / _file                       vocabulary in its order, num_oov
                                       its num_oov_buckets (0: None),
                                       oov_value the default_value's value
  categorical_column_with_identity     integer_categorical of 0..n-1,
                                       oov_value its default_value
  categorical_column_with_hash_bucket  string/integer_hashed (both hash
                                       with string_to_hash_bucket_fast)
  crossed_column of column keys        a cross (HashedCrossing: the same
                                       sparse_cross_hashed)
  embedding_column                     the column's embedding_dim
  indicator_column                     the column's one_hot

The columns are read by their attributes, not their classes: this module
imports no feature column code (TF 2.21 has none). Statistics the columns
give (vocabularies, boundaries) are the spec's, used as given. Whatever has
no counterpart raises a one-line UsageError naming the column.

Ids differ in one way: the package's out-of-vocabulary ids come first
(0..num_oov-1), canned's after the vocabulary; tf2/canned.py reorders the
weights' rows.
"""

import dataclasses

import tensorflow as tf

from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import spec_builder

# Single-valued ids (a spec column holds one value an example): the mean,
# the sum and sqrtn of one embedding are that embedding.
_COMBINERS = ('mean', 'sum', 'sqrtn')


def _kind_of(column):
  return type(column).__name__.lstrip('_')


_fail = spec_builder.fail


def _dtype(column, dtype):
  dtype = tf.as_dtype(dtype)
  if dtype == tf.string:
    return 'string'
  if dtype.is_integer:
    return 'int64'
  if dtype.is_floating:
    return 'float32'
  _fail(column, f'dtype {dtype.name} has no counterpart')


def _numeric(column):
  """A numeric_column's (key, dtype name, default), or a one-line error."""
  if column.normalizer_fn is not None:
    _fail(column, 'its normalizer_fn is a Python function and cannot be '
          'read; drop it and use the kind float_normalized (mean and '
          'variance of the training data) or normalize the data yourself')
  if tuple(column.shape) not in ((), (1,)):
    _fail(column, f'shape {tuple(column.shape)}: the spec\'s columns hold '
          'one number an example')
  default = column.default_value
  if default is not None:
    default = default[0] if isinstance(default, (tuple, list)) else default
  return column.key, _dtype(column, column.dtype), default


def _vocabulary_file(column):
  try:
    with tf.io.gfile.GFile(column.vocabulary_file) as f:
      lines = f.read().splitlines()
  except (OSError, tf.errors.OpError) as e:
    _fail(column, f'cannot read its vocabulary file '
          f'{column.vocabulary_file} ({str(e).splitlines()[0]})')
  if column.vocabulary_size is not None:
    lines = lines[:column.vocabulary_size]
  return lines


def _categorical(column):
  """A categorical column's spec Column (without embedding or one-hot)."""
  kind = _kind_of(column)
  if kind == 'HashedCategoricalColumn':
    dtype = _dtype(column, column.dtype)
    return spec_lib.Column(
        column.key, 'string_hashed' if dtype == 'string' else
        'integer_hashed', num_bins=column.hash_bucket_size)
  if kind == 'IdentityCategoricalColumn':
    # default_value: the id of an out-of-range one.
    return spec_lib.Column(column.key, 'integer_categorical',
                           vocabulary=tuple(range(column.num_buckets)),
                           oov_value=column.default_value)
  if kind in ('VocabularyListCategoricalColumn',
              'VocabularyFileCategoricalColumn'):
    dtype = _dtype(column, column.dtype)
    vocabulary = (list(column.vocabulary_list) if kind.startswith(
        'VocabularyList') else _vocabulary_file(column))
    if dtype == 'int64':
      vocabulary = [int(v) for v in vocabulary]
    else:
      vocabulary = [v.decode() if isinstance(v, bytes) else str(v)
                    for v in vocabulary]
    # num_oov_buckets 0 (and no default_value): canned drops an unknown
    # value (no weight); the package gives it out-of-vocabulary id 0 (the
    # spec's num_oov None), its weights carried as zero. 1 or more: canned's
    # trained buckets (num_oov, which canned_ids places).
    num_oov = column.num_oov_buckets or None
    if num_oov and num_oov > 1 and dtype != 'string':
      _fail(column, f'num_oov_buckets {num_oov} of integers: canned hashes '
            'them, Keras IntegerLookup takes a modulo')
    # default_value (canned allows it only without num_oov_buckets): the
    # vocabulary id of an unknown value.
    default = column.default_value
    return spec_lib.Column(
        column.key, 'string_categorical' if dtype == 'string' else
        'integer_categorical', vocabulary=tuple(vocabulary),
        num_oov=num_oov,
        oov_value=None if default in (None, -1) else vocabulary[default])
  if kind == 'BucketizedColumn':
    key, dtype, default = _numeric(column.source_column)
    return spec_lib.Column(key, 'float_discretized', default=default,
                           dtype=dtype,
                           boundaries=tuple(float(b) for b in
                                            column.boundaries))
  if kind == 'WeightedCategoricalColumn':
    _fail(column, 'a weighted_categorical_column cannot be carried: a spec '
          'column holds one value an example, with no weight per id')
  _fail(column, f'{kind} has no counterpart in the feature spec')


def feature_spec_from_columns(feature_columns, label, head=None, label_vocabulary=None,
            weight=None, name='tabular'):
  """The FeatureSpec of a canned Estimator's `feature_columns` (the linear
  and the deep part's together: a column in both counts once), `label` its
  label feature, `label_vocabulary` and `weight` (weight_column: a name
  or a numeric_column) as given to it, `head` binary, multiclass or
  regression. Raises a one-line UsageError naming a column that cannot be
  carried. See the module's table."""
  builder = spec_builder.Builder()
  deep = ('EmbeddingColumn', 'IndicatorColumn')
  # The wide part's columns first: a deep one that differs is then the
  # second column of its feature, whatever the order given.
  for column in sorted(feature_columns, key=lambda c: _kind_of(c) in deep):
    kind = _kind_of(column)
    if kind == 'NumericColumn':
      key, dtype, default = _numeric(column)
      builder.add(spec_lib.Column(key, 'float', default=default,
                                  dtype=dtype))
    elif kind in deep:
      inner = column.categorical_column
      if kind == 'EmbeddingColumn':
        _check_embedding(column)
        fields = {'embedding_dim': column.dimension}
      else:
        fields = {'one_hot': True}
      if _kind_of(inner) == 'CrossedColumn':
        if kind == 'IndicatorColumn':
          _fail(column, 'one-hot crosses have no counterpart; embed it')
        builder.cross(inner, column.dimension)
      else:
        builder.add(dataclasses.replace(_categorical(inner), **fields,
                                        parts=('dnn',)), deep_name=column.name)
    elif kind == 'CrossedColumn':
      builder.cross(column)
    else:  # A categorical column itself: the wide part's.
      builder.add(dataclasses.replace(_categorical(column),
                                      parts=('linear',)))
  if weight is not None and not isinstance(weight, str):
    weight = _numeric(weight)[0]
  for cross in builder.items['crosses'].values():
    missing = [key for key in cross.columns
               if key not in builder.items['columns']]
    if missing:
      _fail(cross.name, f'crosses the raw feature {missing[0]!r}, which no '
            "other column reads: the spec's crosses are of its columns "
            '(give the model a column of it, or leave the cross out)')
  spec = spec_lib.FeatureSpec(
      tuple(builder.items['columns'].values()), label,
      tuple(builder.items['crosses'].values()),
      tuple(label_vocabulary) if label_vocabulary else None, weight, head,
      name)
  spec_lib.check(spec, 'feature columns')
  return spec


def _check_embedding(column):
  if column.combiner not in _COMBINERS:
    _fail(column, f'combiner {column.combiner!r} has no counterpart')
  if column.max_norm is not None:
    _fail(column, 'max_norm has no counterpart (Keras Embedding clips no '
          'norms)')
  if not column.trainable:
    _fail(column, 'trainable=False has no counterpart (the package trains '
          'every embedding)')
  if column.ckpt_to_load_from is not None:
    _fail(column, 'ckpt_to_load_from: carry the trained model_dir with '
          'migrate instead')


def canned_ids(column, cardinality):
  """For each of the package's ids of spec `column` (or cross), 0 to
  `cardinality` - 1, canned's id of the same values, -1 where canned has
  none (it drops a missing value, and an unknown one of a vocabulary
  without num_oov_buckets or default_value): the row of a canned weight
  matrix that is the row of the package's. Ids of other kinds are
  canned's."""
  if getattr(column, 'vocabulary', None) is None:
    return list(range(cardinality))
  size = len(column.vocabulary)
  num_oov = cardinality - size
  # Identity columns (and num_oov_buckets 0) have no canned oov bucket.
  canned_oov = [size + i for i in range(num_oov)] if column.num_oov else [-1]
  return canned_oov + list(range(size))
