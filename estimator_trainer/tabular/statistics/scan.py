"""One streaming pass over a split's files into a SplitSummary, in bounded
memory: TensorFlow reads and parses batches (CSV's decode_csv, tf.Example's
parse_example) and counts each batch's distinct categorical values; Python
sees only a batch's numbers and its distinct values.

A file whose values TensorFlow rejects or that fail a check (a missing
label, a number that is not finite, a label not of the head...) is read
again by TabularSource.column_chunks, whose checks name the file, the place, the
column and the value (or, where only TensorFlow's parser disagrees with
Python's, summarise it from there). A progress bar (rows/s, ETA) shows on
splits of PROGRESS_ROWS rows or more.
"""

import os

import numpy as np
import tensorflow as tf

from estimator_trainer import sources
from estimator_trainer.tabular import arrow_csv
from estimator_trainer.tabular import parsing
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import table_cells
from estimator_trainer.tabular.parsing import DTYPES, feature_default
from estimator_trainer.tabular.statistics import split_summary

_BATCH = 16384
# Batches parsed at once. AUTOTUNE often kept one at a time beside the busy
# Python consumer (2M census-like rows on 2 cores: 5.6-10.5 s, against
# 4.5-6.6 with 2); past 8 the consumer is the bottleneck.
_PARALLEL = min(os.cpu_count() or 1, 8)
PROGRESS_ROWS = 100_000
_MISSING_BITS = 0x7FC0DEAD
_MISSING_FLOAT = np.array(_MISSING_BITS, np.uint32).view(np.float32)


class _Recheck(Exception):
  """A batch the Python read must look at."""


def summarise(source, split, head=None, files=None, progress=None):
  """The SplitSummary of `split` of TabularSource `source` (of `files`
  only, a subset of the split's: a task's share). `progress`: show a bar
  (None: on PROGRESS_ROWS rows or more); without one (False) `files` alone
  are read, and only to summarise them (a Beam worker's file: not the
  split's others, nor a count of rows first)."""
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top
  files = source.files(split) if files is None else files
  total = None
  if progress is False:
    for path in files:
      source.check_file(path)
  else:
    sizes = dict(zip(source.files(split), source.file_sizes(split)))
    total = sum(sizes[path] for path in files)
  summary = split_summary.SplitSummary(source.feature_spec, head)
  show = total >= PROGRESS_ROWS if progress is None else progress
  with tqdm(total=total, unit=' rows', unit_scale=True, mininterval=1,
            disable=not show, desc=f'Statistics of the {split} split',
            smoothing=0.1) as bar:
    if source.is_csv:
      for path in files:
        summary.merge(_file(source, split, path, head, bar))
    elif files:  # A cluster's trainer may have no file (shares.py).
      summary.merge(sources.eagerly(_tfrecords, source, split, files, head,
                                    bar))
  return summary


def _tfrecords(source, split, paths, head, bar):
  """The SplitSummary of the TFRecord files at `paths`, in one pipeline (one
  per file drained at each file's end: 2M census-like rows in 8 files,
  8.4-9.6 s against 4.5-6.6). From a file TensorFlow rejects, or a batch
  Python must look at, on: file by file (_file). Eager."""
  summary = split_summary.SplitSummary(source.feature_spec, head)
  index, current, progress = 0, None, []
  try:
    for path, (rows, columns, checks) in _tensorflow_batches(source, split,
                                                             paths):
      path = path.decode()
      if current is None or path != paths[index]:
        if current is not None:
          summary.merge(current)
        index = paths.index(path, index)  # Files between gave no batch.
        current, progress = split_summary.SplitSummary(
            source.feature_spec, head), []
      current.add(_values(source.feature_spec, columns, checks), rows)
      bar.update(rows)
      progress.append(rows)
  except (tf.errors.OpError, _Recheck):
    bar.update(-sum(progress))
    for path in paths[index:]:
      summary.merge(_file(source, split, path, head, bar))
    return summary
  return summary.merge(current) if current is not None else summary


def _file(source, split, path, head, bar):
  """The SplitSummary of the file at `path`: by Arrow's CSV reader, by
  TensorFlow's parser if Arrow's leaves a value to it, else by
  TabularSource.columns (whose checks name a bad value)."""
  readers = [lambda: (batch for _, batch in _tensorflow_batches(
      source, split, [path]))]
  if source.is_csv and not source.filtered:  # (A filter hashes records.)
    readers.insert(0, lambda: arrow_csv.batches(source, path))
  for reader in readers:
    progress = []  # Rows counted on the bar, taken back on a recheck.
    try:
      return sources.eagerly(_read, source, head, bar, progress, reader)
    except (tf.errors.OpError, _Recheck, arrow_csv.Rejected):
      bar.update(-sum(progress))
  return sources.eagerly(_checked, source, split, path, head, bar)


def _checked(source, split, path, head, bar):
  """The SplitSummary of the file at `path` read by
  TabularSource.column_chunks: every value checked, in the memory of a
  chunk. Eager."""
  summary = split_summary.SplitSummary(source.feature_spec, head)
  for columns in source.column_chunks(split, files=[path]):
    summary.add_columns(columns)
    bar.update(len(columns[source.feature_spec.label]))
  return summary


def _read(source, head, bar, progress, reader):
  """The SplitSummary of `reader()`'s batches of one file. Eager."""
  summary = split_summary.SplitSummary(source.feature_spec, head)
  for rows, columns, checks in reader():
    summary.add(_values(source.feature_spec, columns, checks), rows)
    bar.update(rows)
    progress.append(rows)
  return summary


def _tensorflow_batches(source, split, paths):
  """(path, (rows, columns, checks)) numpy batches of the files at `paths`,
  in order, as _parse gives them; no batch spans two files."""
  # A split's files are all gzipped or none (TabularSource checks).
  compression = sources.compression(paths)

  def records(path):
    if source.is_csv:
      return tf.data.TextLineDataset(path, compression).skip(1)
    return tf.data.TFRecordDataset(path, compression)

  def parse(path, records):
    if source.is_csv:  # Empty lines are no records.
      records = tf.boolean_mask(records, tf.strings.length(records) > 0)
    if source.filtered:
      records = tf.boolean_mask(records, source.kept(records, split))
    return path, _parse(source, records)

  batches = tf.data.Dataset.from_tensor_slices(list(paths)).interleave(
      lambda path: records(path).batch(_BATCH).map(
          lambda batch: (path, batch)), cycle_length=1)
  # Every parameter is fixed. Left on, tf.data's autotuning made some
  # processes parse one batch at a time all along (2M census-like rows on 2
  # cores, the parse alone: 4 of 6 processes 11.1-11.7 s, the other 2 and
  # 11 of 11 without it 6.2-7.8 s).
  options = tf.data.Options()
  options.autotune.enabled = False
  return batches.map(parse, num_parallel_calls=_PARALLEL).prefetch(
      2).with_options(options).as_numpy_iterator()


def _cells(source, records):
  """Per column name the record's cells: (values of the column's dtype
  where present, whether present, whether it has more than one value)."""
  spec = source.feature_spec
  dtypes = {c.name: c.dtype for c in spec.data_columns}
  dtypes.update({name: spec.label_dtype for name in spec.label_columns})
  if spec.weight:
    dtypes[spec.weight] = 'float32'
  if source.is_csv:
    # Every column: decode_csv checks each record has the header's fields.
    fields = tf.io.decode_csv(records, [tf.constant([''])] *
                              len(source.header))
    cells = {}
    for name, dtype in dtypes.items():
      text = fields[source.header.index(name)]
      present = (tf.strings.length(text) > 0 if dtype == 'string' else
                 ~parsing.missing(text, spec))
      value = text if dtype == 'string' else tf.strings.to_number(
          tf.where(present, text, '0'), DTYPES[dtype])
      cells[name] = value, present, tf.zeros_like(present)
    return cells
  # Dense: 3 times faster than VarLenFeature's. A missing number reads as
  # a NaN of its own bits, a present NaN as another; more than one value,
  # or a required one missing, fails.
  defaults = {c.name: _MISSING_FLOAT if c.dtype == 'float32' else
              feature_default(c) for c in spec.data_columns}
  parsed = tf.io.parse_example(records, {
      name: tf.io.FixedLenFeature([], DTYPES[dtype], defaults.get(name))
      for name, dtype in dtypes.items()})
  cells = {}
  for name, value in parsed.items():
    present = tf.ones_like(value, tf.bool)
    if name in defaults and dtypes[name] == 'float32':
      present = tf.bitcast(value, tf.int32) != _MISSING_BITS
    cells[name] = value, present, tf.zeros_like(present)
  return cells


def _parse(source, records):
  """(rows, columns, checks) of a batch, graph-safe: `columns` what
  SplitSummary.add takes (categorical columns as their distinct values and
  counts), `checks` what Python checks (a string label's distinct
  values) and whether a value is bad here already."""
  spec = source.feature_spec
  cells = _cells(source, records)
  bad = tf.constant(False)
  columns, checks = {}, {}
  for column in spec.data_columns:
    value, present, several = cells[column.name]
    bad |= tf.reduce_any(several)
    default = tf.constant(feature_default(column), DTYPES[column.dtype])
    if column.dtype == 'float32':  # A missing value's default may be NaN.
      bad |= tf.reduce_any(present & ~tf.math.is_finite(value))
    value = tf.where(present, value, default)
    if column.kind in spec_lib.FLOAT_KINDS:
      columns[column.name] = value
    elif column.kind in spec_lib.CATEGORICAL_KINDS:
      distinct, _, counts = tf.unique_with_counts(value)
      columns[column.name] = distinct, counts
  required = list(spec.label_columns) + [spec.weight] * bool(spec.weight)
  for name in required:
    value, present, several = cells[name]
    bad |= tf.reduce_any(several | ~present)
    if name == spec.weight:
      bad |= tf.reduce_any((value < 0) | ~tf.math.is_finite(value))
    elif spec.label_dtype == 'string':
      checks[name] = tf.unique(value)[0]
    else:
      columns[name] = value
      if spec.label_dtype == 'float32':
        bad |= tf.reduce_any(~tf.math.is_finite(value))
  checks['bad'] = bad
  return tf.size(records), columns, checks


def _values(spec, columns, checks):
  """The batch's columns for SplitSummary.add: bytes decoded. Raises
  _Recheck where Python must look."""
  if checks.pop('bad'):
    raise _Recheck()
  try:
    for column in spec.data_columns:
      if column.kind in spec_lib.CATEGORICAL_KINDS and (
          column.dtype == 'string'):
        distinct, counts = columns[column.name]
        if isinstance(distinct, np.ndarray):  # TensorFlow's bytes.
          columns[column.name] = ([v.decode() for v in distinct.tolist()],
                                  counts)
    checked = dict(checks)
    checked.update({name: columns[name] for name in spec.label_columns
                    if name in columns})
    for name, values in checked.items():
      if values.dtype == object:
        values = split_summary.strings(values)
      if table_cells.bad_labels(values, spec)[0].any():
        raise _Recheck()
  except UnicodeDecodeError:
    raise _Recheck() from None
  return columns
