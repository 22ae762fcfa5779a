"""Structured records parsed in the graph as the feature spec says: CSV
lines (by the header's places) or serialized tf.Examples into (raw
features, label, weight); a missing feature's value."""

import tensorflow as tf

from estimator_trainer.tabular import cell_syntax
from estimator_trainer.tabular import spec as spec_lib

DTYPES = {'float32': tf.float32, 'int64': tf.int64, 'string': tf.string}
KIND_DEFAULTS = {'int64': -1, 'string': ''}


def feature_default(column):
  """A feature's value where it is missing."""
  if column.default is not None:
    default = column.default
  elif column.kind in spec_lib.FLOAT_KINDS:
    default = (float('nan') if column.dtype == 'float32' else
               spec_lib.MISSING_INT64)
  else:
    default = KIND_DEFAULTS[column.dtype]
  return float(default) if column.dtype == 'float32' else default


def missing(text, spec):
  """Whether each of a number column's CSV cells, tf.string `text`
  [batch], is a missing value of FeatureSpec `spec`
  (number_missing_values). Graph-safe."""
  return tf.strings.regex_full_match(
      text, cell_syntax.missing_syntax(spec.number_missing_values))


def readable(text, dtype):
  """Whether each of tf.string `text` [batch] is a number of `dtype`
  (float32 or int64) to tf.strings.to_number. Graph-safe."""
  if dtype == 'int64':
    return tf.strings.regex_full_match(text, cell_syntax.INT_SYNTAX)
  return tf.strings.regex_full_match(text, cell_syntax.FLOAT_SYNTAX) & (
      tf.strings.length(text) <= cell_syntax.MAX_FLOAT_CHARS)


def _number(text, column, spec, unreadable_as_missing):
  """A number feature's CSV cells, tf.string `text` [batch], as its dtype:
  a missing value (or, `unreadable_as_missing`, one that is no number) its
  default; another that is no number fails."""
  absent = missing(text, spec)
  if unreadable_as_missing:
    absent |= ~readable(text, column.dtype)
  dtype = DTYPES[column.dtype]
  return tf.where(absent, tf.constant(feature_default(column), dtype),
                  tf.strings.to_number(tf.where(absent, '0', text), dtype))


def parse(spec, records, header=None, unreadable_as_missing=False,
          labels=True):
  """tf.string records [batch] -> (raw, label, weight): raw maps each
  feature column to its values [batch] (float32, int64 or string); the
  label [batch] (string, int64 or float32; multilabel float32 [batch,
  k]); the weight float32 [batch] or None. CSV lines if a `header` is
  given (the file's column names), else serialized tf.Examples: a CSV
  cell of a number feature as cell_syntax.py says (a missing value's
  default, `unreadable_as_missing`: also that of one no number). Without
  `labels`, raw alone: the records need no label (new data). Graph-safe."""
  names = spec.names if labels else [c.name for c in spec.data_columns]
  if header is not None:
    where = {name: header.index(name) for name in names}
    names = sorted(names, key=where.get)
    numbers = {c.name: c for c in spec.data_columns if c.dtype != 'string'}
    # Number features as text first: their missing values are words.
    defaults = [tf.constant([''], tf.string) if name in numbers else
                _csv_default(spec, name) for name in names]
    values = dict(zip(names, tf.io.decode_csv(
        records, defaults, select_cols=[where[n] for n in names])))
    for name, column in numbers.items():
      values[name] = _number(values[name], column, spec,
                             unreadable_as_missing)
  else:
    values = tf.io.parse_example(records, _example_features(spec, labels))
  return _split(spec, values) if labels else values


def _split(spec, values):
  """(raw, label, weight) of parsed columns."""
  raw = {column.name: values[column.name] for column in spec.data_columns}
  if isinstance(spec.label, str):
    label = values[spec.label]
  else:
    label = tf.cast(tf.stack([values[n] for n in spec.label], axis=-1),
                    tf.float32)
  weight = values[spec.weight] if spec.weight else None
  return raw, label, weight


def _csv_default(spec, name):
  """decode_csv's record default: a feature's default, else required."""
  for column in spec.data_columns:
    if column.name == name:
      return tf.constant([feature_default(column)], DTYPES[column.dtype])
  dtype = 'float32' if name == spec.weight else spec.label_dtype
  return tf.constant([], DTYPES[dtype])


def _example_features(spec, labels=True):
  features = {c.name: tf.io.FixedLenFeature([], DTYPES[c.dtype],
                                            default_value=feature_default(c))
              for c in spec.data_columns}
  if labels:
    for name in spec.label_columns:
      features[name] = tf.io.FixedLenFeature([], DTYPES[spec.label_dtype])
    if spec.weight:
      features[spec.weight] = tf.io.FixedLenFeature([], tf.float32)
  return features


def parse_examples(spec, serialized, labels=False):
  """Serialized tf.Examples [batch] -> raw dict of the feature columns
  (serving: no label); with `labels` (TFMA's evaluation), (raw, label,
  weight) as `parse` gives them."""
  values = tf.io.parse_example(serialized,
                               _example_features(spec, labels=labels))
  if not labels:
    return values
  return _split(spec, values)
