"""Tabular files read in Python (table_files.py: one file's lines, header
and count): a split's cells column by column, each row knowing its file and line (CSV) or record (TFRecord, from 1), so
that a bad value fails as one line naming the file, the place, the column
and the value."""

import csv
import io
import re

import numpy as np
import tensorflow as tf

from estimator_trainer.errors import DataError, first_line
from estimator_trainer.tabular import table_files

_BATCH = 4096
_LISTS = {'float32': 'float_list', 'int64': 'int64_list',
          'string': 'bytes_list'}
_CONVERT = {'float32': float, 'int64': int, 'string': str}
_NOT = {'float32': 'is not a number', 'int64': 'is not an integer'}
# A line whose quotes TensorFlow's decode_csv reads: only around whole
# fields, doubled inside them (Python's csv reads more).
_FIELD = r'(?:"(?:[^"]|"")*"|[^,"]*)'
_QUOTED_RIGHT = re.compile(f'{_FIELD}(?:,{_FIELD})*')


def is_csv(path):
  return path.endswith(('.csv', '.csv.gz'))


class Cells:
  """A split's values column by column (None where missing), and where
  each row came from."""

  def __init__(self, files, unit, missing):
    self.files = files
    self.unit = unit  # 'line' or 'record'
    self.missing = missing  # What a missing value is in these files.
    self.values = {}
    self.kinds = {}  # TFRecords: each column's list kind.
    self.file_index = []
    self.numbers = []

  def select(self, mask):
    """Keeps the rows where numpy bool `mask` is True."""
    rows = np.flatnonzero(mask)
    self.values = {name: [column[row] for row in rows]
                   for name, column in self.values.items()}
    self.file_index = [self.file_index[row] for row in rows]
    self.numbers = [self.numbers[row] for row in rows]

  def fail(self, row, name, problem):
    raise DataError(f'{self.files[self.file_index[row]]} {self.unit} '
                    f'{self.numbers[row]}, column {name!r}: {problem}')

  def typed(self, name, dtype, default=None):
    """The column as numpy of `dtype` (float32, int64 or string: str
    objects), missing values `default` (None: an error), floats finite."""
    convert, values = _CONVERT[dtype], []
    for row, value in enumerate(self.values[name]):
      if value is None:
        if default is None:
          self.fail(row, name, f'no value ({self.missing})')
        values.append(default)
        continue
      try:
        values.append(convert(value))
      except (ValueError, OverflowError):
        self.fail(row, name, f'{value!r} {_NOT[dtype]}')
      if dtype == 'int64' and not -2**63 <= values[-1] < 2**63:
        self.fail(row, name, f'{value!r} is out of the int64 range')
    if dtype == 'string':
      return np.array(values, dtype=object)
    array = np.array(values, np.float32 if dtype == 'float32' else np.int64)
    if dtype == 'float32':  # (A missing value's default may be NaN.)
      present = np.array([v is not None for v in self.values[name]], bool)
      bad = np.flatnonzero(~np.isfinite(array) & present)
      if bad.size:
        self.fail(bad[0], name,
                  f'{self.values[name][bad[0]]!r} is not a finite number')
    return array

  def check_labeled(self, name):
    """Fails on the first row without a value of label column `name`."""
    missing = [row for row, value in enumerate(self.values[name])
               if value is None]
    if missing:
      self.fail(missing[0], name, f'no label ({self.missing}); '
                '--skip_rows_without_label leaves such records out')

  def label(self, name, spec):
    """A label column of `spec`, checked against its classes or head."""
    self.check_labeled(name)
    values = self.typed(name, spec.label_dtype)
    bad, problem = bad_labels(values, spec)
    if bad.any():
      row = np.flatnonzero(bad)[0]
      self.fail(row, name, f'label {self.values[name][row]!r} {problem}')
    return values

  def weight(self, name):
    values = self.typed(name, 'float32')
    if (values < 0).any():
      row = np.flatnonzero(values < 0)[0]
      self.fail(row, name, f'weight {self.values[name][row]!r} is negative')
    return values


def bad_labels(values, spec):
  """(mask of the label `values` that `spec` rejects, why it does)."""
  if spec.label_vocabulary:
    return ~np.isin(values, spec.label_vocabulary), (
        f'is not in the label vocabulary ({", ".join(spec.label_vocabulary)})')
  if spec.head in ('binary', 'multilabel'):
    return ((values != 0) & (values != 1),
            f'is not 0 or 1 (the {spec.head} head)')
  if spec.label_dtype == 'int64':
    return values < 0, 'is not a class id (0, 1, ...)'
  return np.zeros(values.shape, bool), ''


def read_csv(files, names=None, max_rows=None):
  """Cells of the CSV `files`' columns `names` (None: the first file's
  header), of about their first `max_rows` records (None: all); an empty
  cell is None."""
  cells = Cells(files, 'line', 'an empty cell')
  for index, path in enumerate(files):
    if max_rows is not None and len(cells.numbers) >= max_rows:
      break
    lines = table_files.csv_lines(
        path, max_rows and max_rows - len(cells.numbers) + 1)
    header = table_files.header(path, lines)
    names = header if names is None else names
    for name in names:
      table_files.check_has(path, name, header)
    places = [header.index(name) for name in names]
    columns = [cells.values.setdefault(name, []) for name in names]
    # strict: bad quoting fails here as in TensorFlow's decode_csv.
    reader, previous = csv.reader(lines[1:], strict=True), 0
    try:
      for row in reader:
        if reader.line_num > previous + 1 and row:
          raise DataError(f'{path} line {previous + 2}: a quoted field goes '
                          'on to the next line; a record is one line')
        previous = reader.line_num
        if not row:
          continue
        line = lines[reader.line_num]
        if '"' in line and not _QUOTED_RIGHT.fullmatch(line):
          raise DataError(f'{path} line {reader.line_num + 1}: a quote in a '
                          'field not in quotes (write "a""b" for a"b)')
        if len(row) != len(header):
          raise DataError(f'{path} line {reader.line_num + 1}: {len(row)} '
                          f'fields, but its header has {len(header)}')
        cells.file_index.append(index)
        cells.numbers.append(reader.line_num + 1)
        for column, place in zip(columns, places):
          column.append(row[place] or None)
    except csv.Error as e:
      raise DataError(f'{path} line {reader.line_num + 1}: {e}') from None
  return cells


def read_examples(files, dtypes=None, max_rows=None):
  """Cells of the TFRecord `files`' tf.Examples: the features of `dtypes`
  (name -> float32, int64 or string) or, if None, every feature of one
  kind throughout; of the first `max_rows` records (None: all). Eager."""
  cells = Cells(files, 'record', 'no such feature')
  cells.values = {name: [] for name in dtypes or ()}
  for index, path in enumerate(files):
    records = table_files.records(path)
    if max_rows is not None:
      records = records.take(max_rows - len(cells.numbers))
    try:
      number = 0
      for batch in records.batch(_BATCH).as_numpy_iterator():
        for record in batch:
          number += 1
          features = table_files.example_of(record, path,
                                            number).features.feature
          row = len(cells.numbers)
          cells.file_index.append(index)
          cells.numbers.append(number)
          if dtypes is None:
            for name in features:
              if name not in cells.values:  # Missing in the rows before.
                cells.values[name] = [None] * row
          for name, column in cells.values.items():
            column.append(_value(cells, row, name, features[name], dtypes)
                          if name in features else None)
    except tf.errors.OpError as e:
      raise DataError(f'{path}: {first_line(e.message)}') from None
  if dtypes is None:  # A tf.Example's features have no order.
    cells.values = dict(sorted(cells.values.items()))
  return cells


def _value(cells, row, name, feature, dtypes):
  """A feature's one value (bytes decoded), of its column's kind."""
  kind = feature.WhichOneof('kind')
  values = getattr(feature, kind).value if kind else ()
  if len(values) != 1:
    cells.fail(row, name, f'{len(values)} values in its {kind or "feature"}; '
               'a column has one value, or none where missing')
  value = values[0]
  if kind == 'bytes_list':
    try:
      value = value.decode('utf-8')
    except UnicodeDecodeError:
      cells.fail(row, name, f'{value!r} is not UTF-8 text')
  wanted = (_LISTS[dtypes[name]] if dtypes else
            cells.kinds.setdefault(name, kind))
  if kind != wanted:
    if dtypes and kind == 'bytes_list':
      cells.fail(row, name, f'{value!r} {_NOT[dtypes[name]]}')
    cells.fail(row, name, f'{value!r} is in a {kind} where '
               f'{"the column needs" if dtypes else "earlier records have"} '
               f'a {wanted}')
  return value


def csv_line(header, values):
  """One CSV record (bytes) of `values` by column name, others empty."""
  line = io.StringIO()
  csv.writer(line, lineterminator='').writerow(
      [values.get(name, '') for name in header])
  return line.getvalue().encode()


def example(values):
  """A serialized tf.Example of `values` (str, int or float) by name."""
  feature = {}
  for name, value in values.items():
    if isinstance(value, str):
      feature[name] = tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[value.encode()]))
    elif isinstance(value, int):
      feature[name] = tf.train.Feature(
          int64_list=tf.train.Int64List(value=[value]))
    else:
      feature[name] = tf.train.Feature(
          float_list=tf.train.FloatList(value=[value]))
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()
