"""Raw tabular columns -> what the models take, by Keras preprocessing
layers built from stored Statistics (never adapted): Normalization,
Discretization, StringLookup, IntegerLookup, Hashing and HashedCrossing;
and the label -> what the head's loss takes.

Built inside whatever graph calls it (Estimator's input_fn and serving
graphs, TF2 eager, tf.function): the lookup tables are created there, and
Estimator's scaffold initialises them as it does any table.
"""

import dataclasses
from typing import Optional, Tuple

import tensorflow as tf

from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import spec as spec_lib

DENSE, IDS = 'dense', 'ids'
# A categorical column's ids: its out-of-vocabulary id 0, then its vocabulary
# from 1 (tabular/warm_start.py remaps the rows they index).
OOV_INDICES = 1


@dataclasses.dataclass(frozen=True)
class EncodedInput:
  """One encoded input as a model sees it: `kind` 'dense' (float32
  [batch, width]) or 'ids' (int64 [batch] in [0, cardinality));
  `embedding_dim` from the feature spec (None: the model's default);
  `cross`: a hashed cross (the wide part's only); `one_hot`: ids the deep
  part takes one-hot, not embedded; `parts`: the feature spec column's."""

  kind: str
  width: Optional[int] = None
  cardinality: Optional[int] = None
  embedding_dim: Optional[int] = None
  cross: bool = False
  one_hot: bool = False
  parts: Optional[Tuple[str, ...]] = None


def _variance(variance):
  """A constant column's variance as 1: Normalization divides by
  max(stddev, 1e-7), which would blow any other value up to ~1e7."""
  return variance if variance > 0 else 1.0


class Encoder(tf.Module):
  """`encoder(raw)`: raw dict column -> Tensor [batch] (TabularSource.parse's)
  to the encoded dict: float kinds float32 [batch, 1] (with a missing
  indicator [batch, 2]: the value, then 1.0 where it was missing;
  float_discretized: int64 ids [batch]); categorical, hashed and crosses
  int64 ids [batch] (categorical: 0 is out of vocabulary; with an
  oov_value, missing). `inputs`: name -> EncodedInput."""

  def __init__(self, feature_spec, statistics, labels=True):
    super().__init__(name='tabular_encoder')
    self.feature_spec = feature_spec
    self.statistics = statistics
    layers = tf.keras.layers
    self._layers, inputs = {}, {}
    for column in feature_spec.columns:
      stats = statistics.columns.get(column.name)
      kind, dim = column.kind, column.embedding_dim
      dense = EncodedInput(DENSE, width=2 if column.missing_indicator else 1)
      if kind == 'float':
        layer, encoded = None, dense
      elif kind == 'float_normalized':
        layer = layers.Normalization(mean=stats.mean,
                                     variance=_variance(stats.variance))
        encoded = dense
      elif kind == 'float_discretized':
        layer = layers.Discretization(bin_boundaries=list(stats.boundaries))
        encoded = EncodedInput(IDS, cardinality=len(stats.boundaries) + 1,
                               embedding_dim=dim, one_hot=column.one_hot)
      elif kind in spec_lib.CATEGORICAL_KINDS:
        lookup = (layers.StringLookup if column.dtype == 'string' else
                  layers.IntegerLookup)
        num_oov = column.num_oov or OOV_INDICES
        layer = lookup(vocabulary=list(stats.vocabulary),
                       num_oov_indices=num_oov)
        encoded = EncodedInput(IDS, cardinality=len(stats.vocabulary) +
                               num_oov,
                               embedding_dim=dim, one_hot=column.one_hot)
      else:  # Hashed.
        layer = layers.Hashing(num_bins=column.num_bins)
        encoded = EncodedInput(IDS, cardinality=column.num_bins,
                               embedding_dim=dim, one_hot=column.one_hot)
      self._layers[column.name] = layer
      inputs[column.name] = dataclasses.replace(encoded, parts=column.parts)
    for cross in feature_spec.crosses:
      self._layers[cross.name] = layers.HashedCrossing(num_bins=cross.num_bins)
      inputs[cross.name] = EncodedInput(IDS, cardinality=cross.num_bins,
                                        embedding_dim=cross.embedding_dim,
                                        cross=True)
    self._inputs = inputs
    # Without `labels` (serving), no label lookup: a SavedModel warns of a
    # layer never called.
    vocabulary = feature_spec.label_vocabulary if labels else None
    # Unknown labels look up as 0 (then -1 once shifted): the assert's cue.
    self._label_lookup = layers.StringLookup(
        vocabulary=list(vocabulary), num_oov_indices=1) if vocabulary else None

  @property
  def inputs(self):
    """name -> EncodedInput, in the spec's order: columns, then crosses."""
    return dict(self._inputs)

  def _encode(self, column, value):
    layer = self._layers[column.name]
    if column.kind in spec_lib.FLOAT_KINDS:
      missing = (tf.math.is_nan(value) if value.dtype == tf.float32 else
                 tf.equal(value, spec_lib.MISSING_INT64))
      value = self._filled(column, value, missing)
      if column.kind == 'float_discretized':
        return layer(value)
      value = value[:, tf.newaxis]
      value = layer(value) if layer else value
      if column.missing_indicator:
        value = tf.concat(
            [value, tf.cast(missing, tf.float32)[:, tf.newaxis]], axis=-1)
      return value
    if column.dtype == 'int64':
      value = tf.cast(value, tf.int64)
    ids = layer(value)
    if column.oov_value is None:
      return ids
    # An unknown value as oov_value (canned's default_value); a missing one
    # ('' or -1, the values canned drops) keeps the out-of-vocabulary id.
    vocabulary = list(self.statistics.columns[column.name].vocabulary)
    unknown = tf.equal(ids, 0) & tf.not_equal(
        value, '' if column.dtype == 'string' else -1)
    return tf.where(unknown, tf.constant(
        vocabulary.index(column.oov_value) + OOV_INDICES, tf.int64), ids)

  def _filled(self, column, value, missing):
    """float32 numbers, a `missing` one (parsing.feature_default's marker)
    the stored fill: the training mean (0.0 in statistics stored before
    it)."""
    stats = self.statistics.columns.get(column.name)
    fill = stats.fill if stats and stats.fill is not None else 0.0
    return tf.where(missing, tf.constant(fill, tf.float32),
                    tf.cast(value, tf.float32))

  def __call__(self, raw):
    encoded = {column.name: self._encode(column,
                                         raw[column.source or column.name])
               for column in self.feature_spec.columns}
    for cross in self.feature_spec.crosses:
      # The raw values, as canned crossed_column hashes them.
      encoded[cross.name] = self._layers[cross.name](
          tuple(raw[c] for c in cross.columns))
    return encoded

  def _num_classes(self, head):
    num_classes = self.statistics.num_classes
    if num_classes is None:
      label = self.feature_spec.label
      raise UsageError(
          f"--head={head} needs the classes of label '{label}': give the "
          'feature spec a label_vocabulary, or statistics computed for a '
          'classification head')
    return num_classes

  def encode_label(self, raw_label, head):
    """multiclass/binary: int64 class ids [batch] (a graph assert names a
    label outside the classes); regression: float32 [batch]; multilabel:
    float32 [batch, k]."""
    if head in ('regression', 'multilabel'):
      return tf.cast(raw_label, tf.float32)
    name = self.feature_spec.label
    if self._label_lookup is not None:  # String labels.
      ids = self._label_lookup(raw_label) - 1
      bad = ids < 0
      message = (f"label '{name}' not in the label vocabulary "
                 f"({', '.join(self.feature_spec.label_vocabulary)}):")
    else:
      num_classes = self._num_classes(head)
      ids = tf.cast(raw_label, tf.int64)
      bad = (ids < 0) | (ids >= num_classes)
      message = f"label '{name}' not a class id 0..{num_classes - 1}:"
    check = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(bad)),
        [message, tf.boolean_mask(raw_label, bad)[:1]])
    with tf.control_dependencies([check]):
      return tf.identity(ids)

  def class_names(self, head):
    """The classes' names: the label vocabulary, else '0'..'K-1'; () for
    regression; the label columns for multilabel."""
    if head == 'regression':
      return ()
    if head == 'multilabel':
      return tuple(self.feature_spec.label)
    if self.feature_spec.label_vocabulary:
      return tuple(self.feature_spec.label_vocabulary)
    return tuple(str(i) for i in range(self._num_classes(head)))
