"""A CSV file's batches by Apache Arrow's streaming CSV reader, as
statistics/scan.py's TensorFlow parse gives them: on the census-like set
1.3 million rows/s against decode_csv's 0.17 million (2 cores, issue 50).

Quotes are not parsed (a quote is a plain character here): a value with a
quote, like any value Arrow rejects, makes scan.py read the file by
TensorFlow's decode_csv, whose quoting rules the training input follows.
"""

import numpy as np

from estimator_trainer.tabular import cell_syntax
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import table_files
from estimator_trainer.tabular.parsing import feature_default

# Bytes per batch: about 40,000 census-like rows.
_BLOCK = 4 << 20
# TensorFlow 2.15's float reading refuses a cell of more than
# MAX_FLOAT_CHARS characters (2.16+'s takes any).
_LONG_FLOATS_REFUSED = cell_syntax.MAX_FLOAT_CHARS < 2**31 - 1


class Rejected(Exception):
  """A value this reader leaves to TensorFlow's."""


def batches(source, path):
  """(rows, columns, checks) of the CSV file at `path` of TabularSource
  `source` (see scan._parse); Arrow's errors raise Rejected."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.csv as pa_csv  # pylint: disable=g-import-not-at-top
  spec = source.feature_spec
  types = {c.name: c.dtype for c in spec.data_columns
           if c.kind in spec_lib.FLOAT_KINDS + spec_lib.CATEGORICAL_KINDS}
  types.update({name: spec.label_dtype for name in spec.label_columns})
  if spec.weight:
    types[spec.weight] = 'float32'
  # Integers as text, read in _numbers: Arrow's int64 reading takes hex
  # (0x1A), which TensorFlow's does not; so are floats where TensorFlow's
  # reading refuses long ones, which Arrow's takes.
  arrow_types = {'float32': pa.string() if _LONG_FLOATS_REFUSED else
                 pa.float32(), 'int64': pa.string(), 'string': pa.string()}
  try:
    reader = pa_csv.open_csv(
        # Local files by Arrow itself (GZIP by the name's .gz).
        path if '://' not in path else pa.PythonFile(table_files.open_bytes(path),
                                                     mode='r'),
        read_options=pa_csv.ReadOptions(block_size=_BLOCK),
        parse_options=pa_csv.ParseOptions(quote_char=False),
        convert_options=pa_csv.ConvertOptions(
            column_types={name: arrow_types[dtype]
                          for name, dtype in types.items()},
            include_columns=list(types),
            null_values=list(spec.number_missing_values),
            # Missing in number columns only: in a string column 'NA' is a
            # value, an empty cell its missing one (filled in _batch).
            strings_can_be_null=False))
    for batch in reader:
      yield _batch(spec, _numbers(batch, types, spec.number_missing_values))
  except (pa.ArrowException, ValueError) as e:
    raise Rejected(str(e)) from None


def _numbers(batch, types, missing):
  """The text `batch` with its number columns read as text (`types`: name
  -> dtype; see batches) read as TensorFlow reads them, null where
  `missing` (the spec's missing values). Raises Rejected on a cell Arrow
  reads and TensorFlow does not."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.compute as pc  # pylint: disable=g-import-not-at-top
  columns = []
  for name in batch.schema.names:
    values = batch.column(name)
    if types[name] == 'int64':
      if pc.any(pc.match_substring(values, 'x')).as_py() or pc.any(
          pc.match_substring(values, 'X')).as_py():
        raise Rejected('a hex integer')
      values = pc.cast(_missing_as_null(values, missing), pa.int64())
    elif types[name] == 'float32' and pa.types.is_string(values.type):
      values = _floats(values, missing)
    columns.append(values)
  return pa.RecordBatch.from_arrays(columns, batch.schema.names)


def _missing_as_null(values, missing):
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.compute as pc  # pylint: disable=g-import-not-at-top
  absent = pc.is_in(values, value_set=pa.array(missing))
  return pc.if_else(absent, pa.scalar(None, pa.string()), values)


def _floats(values, missing):
  """A float column's text (an Array, no nulls) as Arrow's typed read
  reads it, but Rejected on a cell longer than TensorFlow 2.15 reads
  (MAX_FLOAT_CHARS)."""
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.compute as pc  # pylint: disable=g-import-not-at-top
  lengths = pc.binary_length(values)
  if (pc.max(lengths).as_py() or 0) > cell_syntax.MAX_FLOAT_CHARS:
    raise Rejected(f'a float of more than {cell_syntax.MAX_FLOAT_CHARS} '
                   'characters')
  # Most batches' only missing value is an empty cell (pandas writes NaN
  # so) and no number has spaces around it: one cast of the text with
  # empty cells null (validity bits over its own buffers, no copy). The
  # pass then took 4 % more CPU than with Arrow's typed read on census-like
  # rows, 15 % with 5 % of cells empty (the steps below alone: 25 %, 48 %).
  if values.offset == 0:  # (As the reader makes them: the bits fit.)
    present = pc.not_equal(lengths, 0).buffers()[1]
    try:
      floats = pc.cast(pa.Array.from_buffers(
          pa.string(), len(values), [present, *values.buffers()[1:]]),
                       pa.float32())
      if not pc.any(pc.is_nan(floats)).as_py():  # ('NaN' is missing.)
        return floats
    except pa.ArrowInvalid:
      pass
  # Spaces and tabs around a number, as Arrow's typed read takes them.
  return pc.cast(pc.utf8_trim(_missing_as_null(values, missing), ' \t'),
                 pa.float32())


def _batch(spec, batch):
  import pyarrow.compute as pc  # pylint: disable=g-import-not-at-top
  from pyarrow import types as pa_types  # pylint: disable=g-import-not-at-top
  columns, checks, bad = {}, {}, False
  for column in spec.data_columns:
    if column.kind not in spec_lib.FLOAT_KINDS + spec_lib.CATEGORICAL_KINDS:
      continue
    values = batch.column(column.name)
    if column.dtype == 'string' and pc.any(pc.match_substring(
        values, '"')).as_py():
      raise Rejected('a quote')
    default = feature_default(column)
    filled = values.fill_null(default)
    if column.dtype == 'string' and default:
      filled = pc.if_else(pc.equal(values, ''), default, values)
    if column.kind in spec_lib.FLOAT_KINDS:
      columns[column.name] = filled.to_numpy(zero_copy_only=False)
      if column.dtype == 'float32':  # A missing value's default may be NaN.
        present = values.is_valid().to_numpy(zero_copy_only=False)
        bad |= bool((present & ~np.isfinite(columns[column.name])).any())
    else:
      counts = pc.value_counts(filled)
      columns[column.name] = (counts.field('values').to_pylist(),
                              counts.field('counts').to_numpy())
  for name in (*spec.label_columns, *[spec.weight] * bool(spec.weight)):
    values = batch.column(name)
    bad |= values.null_count > 0
    if pa_types.is_string(values.type):
      bad |= bool(pc.any(pc.equal(values, '')).as_py())  # Missing.
      checks[name] = np.array(pc.unique(values).to_pylist(), object)
      continue
    values = values.to_numpy(zero_copy_only=False)
    if name == spec.weight:
      bad |= bool(((values < 0) | ~np.isfinite(values)).any())
    else:
      columns[name] = values
      bad |= bool((~np.isfinite(values.astype(np.float64))).any())
  checks['bad'] = bad
  return batch.num_rows, columns, checks
