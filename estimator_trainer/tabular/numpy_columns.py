"""A split of structured data read whole into numpy (for statistics and
checks), every value checked first, so that bad data fails as one line
naming the file, the line or record, the column and the value."""

import logging

import numpy as np
import tensorflow as tf

from estimator_trainer import sources
from estimator_trainer.tabular import table
from estimator_trainer.tabular import table_cells
from estimator_trainer.tabular.parsing import feature_default

_logger = logging.getLogger(__name__)
_BATCH = 1024  # Records parsed per batch.

def read(source, split, files=None):
  """The whole `split` of a TabularSource `source` as numpy (of `files`
  only, some of its files): each feature column's values (float32, int64,
  or str objects), the label under spec.label (multilabel: float32 [n, k]
  under the tuple), the weight under spec.weight; every value checked
  first (DataError naming file, line or record, column, value)."""
  spec = source.feature_spec
  if files:  # These alone (a Beam worker's file: not the split's others).
    for path in files:
      source.check_file(path)
  else:
    source.file_sizes(split)  # Checks the files have the columns.
    files = source.files(split)
  mask = np.concatenate([source.mask(path, split) for path in files]
                        ) if source.filtered else None
  if source.is_csv:
    cells = table.read_csv(files, spec.names)
  else:
    parsed = sources.eagerly(_parsed_columns, source, files)
    if parsed:
      return parsed if mask is None else {
          name: values[mask] for name, values in parsed.items()}
    kinds = {c.name: c.dtype for c in spec.data_columns}
    kinds.update({name: spec.label_dtype for name in spec.label_columns})
    if spec.weight:
      kinds[spec.weight] = 'float32'
    cells = sources.eagerly(table.read_examples, files, kinds)
  if mask is not None:
    cells.select(mask)
  cells.unreadable_as_missing = source.unreadable_as_missing
  result = {c.name: cells.typed(c.name, c.dtype, feature_default(c))
            for c in spec.data_columns}
  for name, (count, row) in cells.unreadable.items():
    _logger.warning(
        "%d cells of column '%s' in %s are no numbers, read as missing "
        '(--unreadable_as_missing); the first: %r, %s line %d', count, name,
        ', '.join(files), cells.values[name][row],
        files[cells.file_index[row]], cells.numbers[row])
  labels = [cells.label(name, spec) for name in spec.label_columns]
  result[spec.label] = (labels[0] if isinstance(spec.label, str) else
                        np.stack(labels, axis=-1).astype(np.float32))
  if spec.weight:
    result[spec.weight] = cells.weight(spec.weight)
  return result


def _parsed_columns(source, files):
  """read() of TFRecords by TensorFlow's parser (8 times faster than
  reading them in Python); None if a value is bad: the Python read then
  names it. Eager."""
  spec = source.feature_spec
  try:
    batches = list(tf.data.TFRecordDataset(
        files, compression_type=sources.compression(files)).batch(
            _BATCH).map(lambda records: tuple(
                part for part in source.parse(records) if part is not None))
        .as_numpy_iterator())
  except tf.errors.OpError:
    return None
  if not batches:
    return None
  result = {name: np.concatenate([batch[0][name] for batch in batches])
            for name in batches[0][0]}
  result[spec.label] = np.concatenate([batch[1] for batch in batches])
  if spec.weight:
    result[spec.weight] = np.concatenate([batch[2] for batch in batches])
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
