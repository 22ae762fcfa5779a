"""What --mode=predict reads of structured data: each record of a split with
the place that names it (its file, and its line in a CSV file or its
record in a TFRecord file, from 1, as the package's errors count them),
its features parsed without a label (new data may have none) and the key
column's value (--key_column), all forwarded to its predictions as canned
Estimators' forward_features does (models.FeatureKeys' forward)."""

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer import sources
from estimator_trainer.tabular import parsing
from estimator_trainer.tabular import table_files

FILE, LINE, RECORD = 'file', 'line', 'record'
_BATCH = 1024
# A tf.Example's value kind -> the key's dtype name (parsing.DTYPES).
_KINDS = {'bytes_list': 'string', 'int64_list': 'int64',
          'float_list': 'float32'}


def key_dtype(source):
  """The dtype name of `source`'s key column: a CSV cell's text as it is
  (an id of leading zeros stays itself), a TFRecord feature's own kind
  (of the first record of the first file that has it). Eager."""
  if source.is_csv:
    return 'string'
  path = source.files(sources.TEST)[0]
  def kind(path):
    for number, record in enumerate(table_files.records(path).take(
        table_files.SCANNED_RECORDS).as_numpy_iterator(), 1):
      feature = table_files.example_of(record, path, number).features.feature
      if source.key in feature:
        return _KINDS[feature[source.key].WhichOneof('kind')]
    return 'string'
  return sources.eagerly(kind, path)


def placed(source, split):
  """tf.data.Dataset of (record, file, its line or record number) of
  `split`'s records, in files' order (empty CSV lines left out, as
  TabularSource.records does)."""
  compression = sources.compression(source.files(split))

  def of_file(path):
    if source.is_csv:
      numbered = tf.data.TextLineDataset(
          path, compression_type=compression).enumerate(1).skip(1)
      # By batch: Dataset.filter takes 7 times longer (source.py).
      numbered = numbered.batch(_BATCH).map(lambda numbers, lines: tuple(
          tf.boolean_mask(values, tf.strings.length(lines) > 0)
          for values in (numbers, lines))).unbatch()
    else:
      numbered = tf.data.TFRecordDataset(
          path, compression_type=compression).enumerate(1)
    return numbered.map(lambda number, record: (record, path, number))

  ds = tf.data.Dataset.from_tensor_slices(
      tf.constant(source.files(split), tf.string)).flat_map(of_file)
  if source.filtered:
    ds = ds.filter(lambda record, path, number: source.kept(
        record[tf.newaxis], split)[0])
  return ds


def features(source, encoder, key_type, records, paths, numbers):
  """The model's features of a batch of placed records, with their places
  and key under the forward prefix (models.FeatureKeys). Graph-safe."""
  csv = source.is_csv
  raw = parsing.parse(source.feature_spec, records,
                      source.header if csv else None,
                      source.unreadable_as_missing, labels=False)
  encoded = encoder(raw)
  forwarded = {FILE: paths, LINE if csv else RECORD: numbers}
  if source.key:
    forwarded[source.key] = parse_key(source.key, key_type, records,
                                      source.header if csv else None)
  forward = models.FeatureKeys.of(encoder.inputs).forward
  encoded.update({forward + name: values
                  for name, values in forwarded.items()})
  return encoded


def parse_key(key, dtype, records, header=None):
  """Column `key`'s values [batch] of CSV lines (by the `header`'s places)
  or serialized tf.Examples (of `dtype`; absent: '' or -1, so that an
  export's classify and regress, which return no key, serve a request
  without it). Graph-safe."""
  if header is not None:
    return tf.io.decode_csv(records, [tf.constant([''])],
                            select_cols=[header.index(key)])[0]
  default = parsing.KIND_DEFAULTS.get(dtype, float('nan'))
  return tf.io.parse_example(records, {key: tf.io.FixedLenFeature(
      [], parsing.DTYPES[dtype], default_value=default)})[key]
