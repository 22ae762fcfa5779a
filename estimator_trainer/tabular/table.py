"""Tabular files read in Python (table_files.py: one file's lines, header
and count) into a split's cells column by column (table_cells.Cells), each
row knowing its file and line (CSV) or record (TFRecord, from 1), so that a
bad value fails as one line naming the file, the place, the column and the
value; and one record written."""

import csv
import io
import itertools
import re

import tensorflow as tf

from estimator_trainer.errors import DataError, first_line
from estimator_trainer.tabular import table_files
from estimator_trainer.tabular.table_cells import NOT, Cells

_BATCH = 4096
LISTS = {'float32': 'float_list', 'int64': 'int64_list',
         'string': 'bytes_list'}
# A line whose quotes TensorFlow's decode_csv reads: only around whole
# fields, doubled inside them (Python's csv reads more).
_FIELD = r'(?:"(?:[^"]|"")*"|[^,"]*)'
_QUOTED_RIGHT = re.compile(f'{_FIELD}(?:,{_FIELD})*')


def is_csv(path):
  return path.endswith(('.csv', '.csv.gz'))


def read_csv(files, names=None, max_rows=None):
  """Cells of the CSV `files`' columns `names` (None: the first file's
  header), of their first `max_rows` records (None: all); an empty cell is
  None."""
  return next(csv_chunks(files, names, max_rows))


def csv_chunks(files, names=None, rows=None):
  """read_csv's Cells, `rows` records at a time (None: all at once), read
  line by line: files of any size in the memory of `rows` records. A
  chunk's `start`: the records of the files before it. At least one chunk
  (of no records if the files have none)."""
  cells, done = None, 0
  for index, path in enumerate(files):
    lines = table_files.text_lines(path)
    header = table_files.header(path, [text for _, text in
                                       itertools.islice(lines, 1)])
    names = header if names is None else names
    for name in names:
      table_files.check_has(path, name, header)
    places = [header.index(name) for name in names]
    for number, row in _records(path, header, lines):
      if cells is None:
        cells = _chunk(files, names, done)
        columns = [cells.values[name] for name in names]
      cells.file_index.append(index)
      cells.numbers.append(number)
      for column, place in zip(columns, places):
        column.append(row[place] or None)
      if len(cells.numbers) == rows:
        yield cells
        cells, done = None, done + rows
  if cells is not None or not done:
    yield cells or _chunk(files, names or (), done)


def _chunk(files, names, start):
  cells = Cells(files, 'line', 'an empty cell')
  cells.values = {name: [] for name in names}
  cells.start = start
  return cells


def _records(path, header, lines):
  """(line number, fields) of the CSV records of `lines` (text_lines after
  the header), each checked to read as TensorFlow's decode_csv reads it."""
  last = [None]  # The line the reader took last.

  def texts():
    for _, last[0] in lines:
      yield last[0]

  # strict: bad quoting fails here as in TensorFlow's decode_csv.
  reader, previous = csv.reader(texts(), strict=True), 0
  try:
    for row in reader:
      if reader.line_num > previous + 1 and row:
        raise DataError(f'{path} line {previous + 2}: a quoted field goes '
                        'on to the next line; a record is one line')
      previous = reader.line_num
      if not row:
        continue
      if '"' in last[0] and not _QUOTED_RIGHT.fullmatch(last[0]):
        raise DataError(f'{path} line {reader.line_num + 1}: a quote in a '
                        'field not in quotes (write "a""b" for a"b)')
      if len(row) != len(header):
        raise DataError(f'{path} line {reader.line_num + 1}: {len(row)} '
                        f'fields, but its header has {len(header)}')
      yield reader.line_num + 1, row
  except csv.Error as e:
    raise DataError(f'{path} line {reader.line_num + 1}: {e}') from None


def read_csv_present(files, name, start=0, max_values=None, distinct=False):
  """Cells of the CSV `files`' column `name`: its non-empty cells in the
  records from record `start` (0: the first) on, the first `max_values`
  of them (None: all) or, if `distinct`, the first of each value; read
  line by line, in little memory. Its `skipped`: the records read whose
  cell is empty."""
  cells = Cells(files, 'line', 'an empty cell')
  values, seen, cells.skipped, record = [], set(), 0, 0
  cells.values[name] = values
  for index, path in enumerate(files):
    lines = table_files.text_lines(path)
    header = table_files.header(path, [text for _, text in
                                       itertools.islice(lines, 1)])
    table_files.check_has(path, name, header)
    reader = csv.reader((text for _, text in lines), strict=True)
    try:
      for row in reader:
        record += bool(row)
        if record <= start or not row:
          continue
        value = row[header.index(name)] if len(row) == len(header) else ''
        if not value or (distinct and value in seen):
          cells.skipped += not value
          continue
        seen.add(value)
        values.append(value)
        cells.file_index.append(index)
        cells.numbers.append(reader.line_num + 1)
        if max_values is not None and len(values) >= max_values:
          return cells
    except csv.Error as e:
      raise DataError(f'{path}: cannot read it ({first_line(e)})') from None
  return cells


def read_examples(files, dtypes=None, max_rows=None):
  """Cells of the TFRecord `files`' tf.Examples: the features of `dtypes`
  (name -> float32, int64 or string) or, if None, every feature of one
  kind throughout; of the first `max_rows` records (None: all). Eager."""
  cells = example_cells(files, dtypes)
  for index, path in enumerate(files):
    records = table_files.records(path)
    if max_rows is not None:
      records = records.take(max_rows - len(cells.numbers))
    try:
      number = 1
      for batch in records.batch(_BATCH).as_numpy_iterator():
        add_examples(cells, index, batch, number, dtypes)
        number += len(batch)
    except tf.errors.OpError as e:
      raise DataError(f'{path}: {first_line(e.message)}') from None
  if dtypes is None:  # A tf.Example's features have no order.
    cells.values = dict(sorted(cells.values.items()))
  return cells


def example_cells(files, dtypes=None):
  """Empty Cells of the TFRecord `files`' features of `dtypes`."""
  cells = Cells(files, 'record', 'no such feature')
  cells.values = {name: [] for name in dtypes or ()}
  return cells


def add_examples(cells, index, records, number, dtypes=None):
  """Adds serialized tf.Examples `records` of file `files[index]`, the
  first its record `number` (from 1), to `cells` (read_examples')."""
  path = cells.files[index]
  for number, record in enumerate(records, number):
    features = table_files.example_of(record, path, number).features.feature
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
  wanted = (LISTS[dtypes[name]] if dtypes else
            cells.kinds.setdefault(name, kind))
  if kind != wanted:
    if dtypes and kind == 'bytes_list':
      cells.fail(row, name, f'{value!r} {NOT[dtypes[name]]}')
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
