"""A split of structured data read into numpy (for statistics and checks),
whole or a chunk of records at a time, every value checked first, so that
bad data fails as one line naming the file, the line or record, the column
and the value."""

import logging

import numpy as np
import tensorflow as tf

from estimator_trainer import sources
from estimator_trainer.errors import DataError, first_line
from estimator_trainer.tabular import table
from estimator_trainer.tabular import table_cells
from estimator_trainer.tabular import table_files
from estimator_trainer.tabular.parsing import feature_default

_logger = logging.getLogger(__name__)
# Records per chunk: a chunk's Python cells take ~60 MB on census-like rows.
CHUNK_ROWS = 1 << 16
_WHOLE = 1 << 62  # A batch of a whole file.


def read(source, split, files=None):
  """The whole `split` of a TabularSource `source` as numpy (of `files`
  only, some of its files): each feature column's values (float32, int64,
  or str objects), the label under spec.label (multilabel: float32 [n, k]
  under the tuple), the weight under spec.weight; every value checked
  first (DataError naming file, line or record, column, value)."""
  parts = sources.eagerly(lambda: list(chunks(source, split, files, None)))
  if len(parts) == 1:
    return parts[0]
  return {name: np.concatenate([part[name] for part in parts])
          for name in parts[0]}


def chunks(source, split, files, rows):
  """read()'s columns of `rows` records at a time (None: all at once), in
  the memory of a chunk: files of any size. At least one chunk. Eager."""
  spec = source.feature_spec
  if files:  # These alone (a Beam worker's file: not the split's others).
    for path in files:
      source.check_file(path)
  else:
    source.file_sizes(split)  # Checks the files have the columns.
    files = source.files(split)
  mask = np.concatenate([source.mask(path, split) for path in files]
                        ) if source.filtered else None
  unreadable = {}  # Column -> [count, (file, line) of the first].
  if source.is_csv:
    parts = ((cells.start, cells)
             for cells in table.csv_chunks(files, spec.names, rows))
  else:
    parts = _example_chunks(source, files, rows)
  for start, part in parts:
    if isinstance(part, dict):  # Parsed by TensorFlow, checked.
      size = len(part[spec.label])
      if mask is not None:
        part = {name: values[mask[start:start + size]]
                for name, values in part.items()}
      yield part
      continue
    if mask is not None:
      part.select(mask[start:start + len(part.numbers)])
    yield _typed(part, spec, source.unreadable_as_missing, unreadable)
  for name, (count, value, path, number) in unreadable.items():
    _logger.warning(
        "%d cells of column '%s' in %s are no numbers, read as missing "
        '(--unreadable_as_missing); the first: %r, %s line %d', count, name,
        ', '.join(files), value, path, number)


def features(cells, spec, unreadable_as_missing):
  """The numpy columns of Cells `cells`' features, every value checked (a
  bad one a DataError naming it)."""
  cells.unreadable_as_missing = unreadable_as_missing
  cells.missing_values = frozenset(spec.number_missing_values)
  return {c.name: cells.typed(c.name, c.dtype, feature_default(c))
          for c in spec.data_columns}


def _typed(cells, spec, unreadable_as_missing, unreadable):
  """The numpy columns of Cells `cells`; counts the cells read as missing
  into `unreadable`."""
  result = features(cells, spec, unreadable_as_missing)
  for name, (count, row) in cells.unreadable.items():
    first = unreadable.setdefault(name, [0, cells.values[name][row],
                                         cells.files[cells.file_index[row]],
                                         cells.numbers[row]])
    first[0] += count
  labels = [cells.label(name, spec) for name in spec.label_columns]
  result[spec.label] = (labels[0] if isinstance(spec.label, str) else
                        np.stack(labels, axis=-1).astype(np.float32))
  if spec.weight:
    result[spec.weight] = cells.weight(spec.weight)
  return result


def _example_chunks(source, files, rows):
  """(records before it, chunk) of the TFRecord `files`' records, `rows` at
  a time (None: a file at a time), parsed by TensorFlow (8 times faster
  than in Python) into read()'s columns or, where a value is bad, as
  Cells, whose checks name it. Eager."""
  spec = source.feature_spec
  kinds = {c.name: c.dtype for c in spec.data_columns}
  kinds.update({name: spec.label_dtype for name in spec.label_columns})
  if spec.weight:
    kinds[spec.weight] = 'float32'
  start = 0  # Records before the chunk, of every file.
  for index, path in enumerate(files):
    number = 1  # The file's record number of the chunk's first.
    try:
      for batch in table_files.records(path).batch(
          rows or _WHOLE).as_numpy_iterator():
        part = _parsed(source, batch)
        if part is None:
          part = table.example_cells(files, kinds)
          table.add_examples(part, index, batch, number, kinds)
        yield start, part
        start, number = start + len(batch), number + len(batch)
    except tf.errors.OpError as e:
      raise DataError(f'{path}: {first_line(e.message)}') from None
  if not start:
    yield 0, table.example_cells(files, kinds)


def _parsed(source, records):
  """read()'s columns of serialized tf.Examples `records` (numpy), parsed
  by TensorFlow; None if a value is bad: the Python read then names it."""
  spec = source.feature_spec
  try:
    raw, label, weight = source.parse(tf.constant(records))
  except tf.errors.OpError:
    return None
  result = {name: values.numpy() for name, values in raw.items()}
  result[spec.label] = label.numpy()
  if spec.weight:
    result[spec.weight] = weight.numpy()
  for name, values in result.items():
    if values.dtype == object:  # Bytes: str, as the Python read gives.
      try:
        result[name] = np.array([v.decode() for v in values], object)
      except UnicodeDecodeError:
        return None
    elif values.dtype == np.float32 and not np.isfinite(values).all():
      return None
  if table_cells.bad_labels(result[spec.label], spec)[0].any() or (
      spec.weight and (result[spec.weight] < 0).any()):
    return None
  return result
