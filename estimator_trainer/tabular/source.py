"""TabularSource: CSV files (a header row) or TFRecords of tf.Example, read
as the feature spec says: counted and checked, split (held out, unlabeled
records skipped), sharded into records, parsed in the graph (parsing.py),
and read whole into numpy (numpy_columns.py) with every value checked, so
that bad data fails as one line naming the file, the line or record, the
column and the value.

Labels and weights are required (a missing one is an error); a feature's
missing value (an empty CSV cell, in a number column also NA, null, ...:
cell_syntax.MISSING_VALUES; an absent feature) is its Column default or,
without one, its kind's: a number NaN (as int64: spec.MISSING_INT64),
which the encoder replaces by the training mean; -1 or '' for ids
(out-of-vocabulary).
"""

import dataclasses
import functools

import numpy as np
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import sources
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.sources.files import memoized
from estimator_trainer.tabular import numpy_columns
from estimator_trainer.tabular import parsing
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import splits
from estimator_trainer.tabular import table
from estimator_trainer.tabular import table_files

_BATCH = 1024


class TabularSource:
  """The splits' files of `patterns` ({sources.TRAIN: glob, sources.TEST:
  glob}; comma-separated globs), described by `feature_spec`. Files ending
  .csv or .csv.gz are CSV, any others TFRecords of tf.Example (.gz: GZIP);
  all of one format. `head` (--head), if given, replaces the spec's: the
  label's dtype depends on it.

  Without a TEST glob, `eval_fraction` of the training files' records
  (by a hash of each record: equal records go to one split) are the TEST
  split and are left out of TRAIN; `validation_fraction` of the rest are
  left out of TRAIN too (splits.py): validation()'s TEST split. `cv_fold`
  (K, N): TEST is that cross-validation fold of the training records. With
  `skip_unlabeled`, records without a label (an empty cell, an absent
  feature; any of multilabel's) are left out of both splits (else they
  fail as bad values do). With `unreadable_as_missing`, a CSV cell of a
  number feature that is no number is a missing value (else an error
  naming it). Without `labels`, the files need the features alone (new
  data to predict on); `key`, a column each file needs too (rows.py)."""

  def __init__(self, patterns, feature_spec, head=None, eval_fraction=None,
               skip_unlabeled=False, unreadable_as_missing=False,
               labels=True, key=None, validation_fraction=None,
               validation=False, cv_fold=None):
    self.patterns, self.labels, self.key = patterns, labels, key
    self.skip_unlabeled = skip_unlabeled
    self.unreadable_as_missing = unreadable_as_missing
    if patterns.get(sources.TEST):
      eval_fraction = None
    elif not eval_fraction:
      raise ValueError('no evaluation files and no eval_fraction')
    self._options = dict(  # validation()'s.
        eval_fraction=eval_fraction, skip_unlabeled=skip_unlabeled, key=key,
        labels=labels, unreadable_as_missing=unreadable_as_missing,
        validation_fraction=validation_fraction, cv_fold=cv_fold)
    self._buckets = splits.Buckets(eval_fraction, validation_fraction,
                                   validation, cv_fold)
    if head and head != feature_spec.head:
      feature_spec = dataclasses.replace(feature_spec, head=head)
      spec_lib.check(feature_spec, f'--head={head} with the feature spec')
    self.feature_spec = feature_spec

  def __str__(self):
    return self.describe()

  def describe(self, absolute=False):
    """The files and the split, in words; `absolute`: local paths made
    absolute (a record that a run in another directory reads alike)."""
    kind = "CSV" if self.is_csv else "TFRecord"
    patterns = {split: layout.absolute(pattern) if absolute else pattern
                for split, pattern in self.patterns.items()}
    shown = ([patterns[sources.TRAIN]] if self._buckets.test_from_training
             else filter(None, patterns.values()))
    return f'{kind} files {" / ".join(shown)}{self._buckets.describe()}'

  @memoized
  def validation(self):
    """A source whose TEST split is the validation part (splits.py)."""
    return TabularSource(self.patterns, self.feature_spec, **self._options,
                         validation=True)

  @memoized
  def files(self, split):
    return sources.glob_files(self.patterns[
        sources.TRAIN if self._buckets.test_from_training else split])

  @property
  def filtered(self):
    """Whether a split is some of its files' records, not all."""
    return any(self._buckets.ranges.values()) or self.skip_unlabeled

  def kept(self, records, split):
    """Which of the tf.string `records` [batch] belong to `split` (by
    bucket; with a label if unlabeled ones are skipped). Graph-safe."""
    kept = tf.ones_like(records, tf.bool)
    if self._buckets.ranges[split]:
      kept = self._buckets.kept(splits.bucket(records), split)
    if self.skip_unlabeled:
      kept &= self._labeled(records)
    return kept

  def _labeled(self, records):
    """Whether each of `records` [batch] has every label column's value."""
    names = self.feature_spec.label_columns
    if self.is_csv:
      where = sorted(self.header.index(name) for name in names)
      cells = tf.io.decode_csv(records, [tf.constant([''])] * len(where),
                               select_cols=where)
      number = self.feature_spec.label_dtype != 'string'
      return tf.reduce_all(tf.stack(
          [~parsing.missing(cell, self.feature_spec) if number else tf.strings.length(cell) > 0
           for cell in cells]), axis=0)
    dtype = parsing.DTYPES[self.feature_spec.label_dtype]
    parsed = tf.io.parse_example(
        records, {name: tf.io.VarLenFeature(dtype) for name in names})
    counts = [tf.math.bincount(tf.cast(parsed[name].indices[:, 0], tf.int32),
                               minlength=tf.size(records))
              for name in names]
    return tf.reduce_all(tf.stack([count > 0 for count in counts]), axis=0)

  @memoized
  def _record_flags(self, path):
    """Each record's hash bucket (int64) and whether it has its label, of
    the file at `path`: one read for every split's mask and count."""
    def flags(path):
      buckets, labeled = [np.zeros([0], np.int64)], [np.zeros([0], bool)]
      for bucket, has_label in self._read([path]).batch(_BATCH).map(
          lambda records: (
              splits.bucket(records),
              self._labeled(records) if self.skip_unlabeled else
              tf.ones_like(records, tf.bool))).as_numpy_iterator():
        buckets.append(bucket)
        labeled.append(has_label)
      return np.concatenate(buckets), np.concatenate(labeled)
    return sources.eagerly(flags, path)

  def mask(self, path, split):
    """kept()'s choice for each record of the file at `path` (numpy)."""
    buckets, labeled = self._record_flags(path)
    kept = self._buckets.kept(buckets, split)
    return labeled if kept is None else labeled & kept

  def unlabeled(self, split):
    """How many records of `split`'s files have no label and are left out
    (skip_unlabeled; a held-out split's files are the training ones)."""
    if not self.skip_unlabeled:
      return 0
    return sum(int((~self._record_flags(path)[1]).sum())
               for path in self.files(split))

  @functools.cached_property
  def is_csv(self):
    """Whether the files are CSV (else TFRecords)."""
    files = [f for split, pattern in self.patterns.items() if pattern
             for f in self.files(split)]
    csv_files = [f for f in files if table.is_csv(f)]
    if csv_files and len(csv_files) < len(files):
      other = next(f for f in files if not table.is_csv(f))
      raise DataError(f'{csv_files[0]} is CSV but {other} is not: the '
                      'files of both splits must be all CSV (.csv, .csv.gz) '
                      'or all TFRecords')
    return bool(csv_files)

  @functools.cached_property
  def _first_file(self):
    """The file whose CSV header parsing places columns by: the first of
    training, if given; every file's header is checked against it."""
    split = sources.TRAIN if self.patterns.get(sources.TRAIN) else sources.TEST
    return self.files(split)[0]

  @functools.cached_property
  def header(self):
    return table_files.csv_header(self._first_file)

  @memoized
  def file_sizes(self, split):
    """Records per file of `split`, in files' order; check_file of each."""
    files = self.files(split)
    plain = [f for f in files if not f.endswith('.gz')]
    if plain and len(plain) < len(files):
      raise DataError(f'{next(f for f in files if f not in plain)} is '
                      f'gzipped but {plain[0]} is not: the files of a split '
                      'must be all gzipped (.gz) or none')
    for path in files:
      self.check_file(path)
    if self.is_csv:
      sizes = tuple(table_files.csv_file(path)[1] for path in files)
    else:  # Eager even when an input_fn asks inside Estimator's graph.
      sizes = tuple(sources.eagerly(table_files.tfrecord_count, path)
                    for path in files)
    if self.filtered:
      return tuple(int(self.mask(path, split).sum()) for path in files)
    return sizes

  @memoized
  def check_file(self, path):
    """DataError unless the file at `path` has the columns the spec names
    (UsageError: the key): a CSV file in its header (at the places of the
    first file's), a TFRecord file in its first records. Reads no more of
    it: a Beam worker checks its own file so."""
    data = [c.name for c in self.feature_spec.data_columns]
    names = [*(self.feature_spec.names if self.labels else data), self.key]
    columns = (table_files.csv_header(path) if self.is_csv else
               sources.eagerly(table_files.tfrecord_keys, path))
    if self.key and self.key not in columns:  # The flag's, not the data's.
      raise UsageError(f'{path}: no column {self.key!r} (--key_column; '
                       '--key_column= predicts without one); its columns: '
                       f'{", ".join(columns)}')
    for name in filter(None, names):
      table_files.check_has(path, name, columns,
                            None if self.is_csv else table_files.SCANNED_RECORDS)
      if self.is_csv and columns.index(name) != self.header.index(name):
        raise DataError(
            f'{path}: column {name!r} is its column {columns.index(name) + 1}'
            f' but column {self.header.index(name) + 1} of '
            f'{self._first_file}; every CSV file needs the '
            "feature spec's columns at the same places")

  def num_examples(self, split):
    return sum(self.file_sizes(split))

  def records(self, split, num_shards=1, index=0):
    """tf.data.Dataset of scalar tf.string records (CSV lines without the
    header, or serialized tf.Examples), in files' order, pipeline `index`
    of `num_shards`: every pipeline the same count within one (whole files
    when they share evenly, else by record)."""
    files = self.files(split)
    if sources.whole_files(self.file_sizes(split), split, num_shards):
      return self._read(files[index::num_shards], split)
    return self._read(files, split).shard(num_shards, index)

  def _read(self, files, split=None):
    """The records of `files`, those of `split` if one is held out."""
    records = self._read_all(files)
    if self.filtered and split:
      records = records.filter(
          lambda record: self.kept(record[tf.newaxis], split)[0])
    return records

  def _read_all(self, files):
    compression = sources.compression(files) if files else None
    files = tf.constant(files, tf.string)
    if not self.is_csv:
      return tf.data.TFRecordDataset(files, compression_type=compression)
    # Empty lines dropped by batch: Dataset.filter took 7 times longer
    # (5.7 s for 200,000 lines).
    return tf.data.Dataset.from_tensor_slices(files).flat_map(
        lambda f: tf.data.TextLineDataset(
            f, compression_type=compression).skip(1).batch(_BATCH).map(
                lambda lines: tf.boolean_mask(
                    lines, tf.strings.length(lines) > 0)).unbatch())

  @functools.cached_property
  def padding_record(self):
    """A record (bytes) whose features parse to their defaults: the label's
    first class and weight 0 (both are required)."""
    spec = self.feature_spec
    if spec.label_vocabulary:
      label = spec.label_vocabulary[0]
    else:
      label = 0 if spec.label_dtype == 'int64' else 0.0
    values = {name: label for name in spec.label_columns}
    if spec.weight:
      values[spec.weight] = 0.0
    if self.is_csv:
      return table.csv_line(self.header, values)
    return table.example(values)

  def parse(self, records):
    """tf.string records [batch] -> (raw, label, weight): parsing.parse."""
    return parsing.parse(self.feature_spec, records,
                         self.header if self.is_csv else None,
                         self.unreadable_as_missing)

  def parse_examples(self, serialized, labels=False):
    return parsing.parse_examples(self.feature_spec, serialized, labels)

  def columns(self, split, files=None):
    """The whole split as numpy, every value checked (numpy_columns)."""
    return numpy_columns.read(self, split, files)

  def column_chunks(self, split, files=None):
    """columns(), a chunk of records at a time (numpy_columns.chunks):
    files of any size in bounded memory. Eager."""
    return numpy_columns.chunks(self, split, files,
                                numpy_columns.CHUNK_ROWS)
