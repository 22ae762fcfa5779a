"""A split's cells column by column (None where missing), each row knowing
where it came from, read as their column's kind: a bad value fails as one
line naming the file, the place, the column and the value."""

import numpy as np

from estimator_trainer.errors import DataError
from estimator_trainer.tabular import cell_syntax

_CONVERT = {'float32': float, 'int64': int, 'string': str}
NOT = {'float32': 'is not a number', 'int64': 'is not an integer'}


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
    # A number feature's cell that is no number: missing (counted by
    # column: [count, first row]) if set, else an error.
    self.unreadable_as_missing = False
    self.unreadable = {}
    # The cells of a number column that are missing values (a feature
    # spec's number_missing_values).
    self.missing_values = frozenset(cell_syntax.MISSING_VALUES)

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

  def absent(self, value, dtype):
    """Whether a cell of a `dtype` column is a missing value: None, or in a
    number column one of `missing_values`."""
    return value is None or (dtype != 'string' and isinstance(value, str) and
                             value in self.missing_values)

  def _absence(self, value):
    """What makes missing `value` missing, in words."""
    return self.missing if value is None else f'{value!r}, a missing value'

  def typed(self, name, dtype, default=None):
    """The column as numpy of `dtype` (float32, int64 or string: str
    objects), missing values `default` (None: an error), floats finite. A
    CSV cell is read as training's parser reads it (cell_syntax.py)."""
    values, present = [], []
    for row, value in enumerate(self.values[name]):
      present.append(not self.absent(value, dtype))
      if not present[-1]:
        if default is None:
          self.fail(row, name, f'no value ({self._absence(value)})')
        values.append(default)
        continue
      text = isinstance(value, str) and dtype != 'string'
      try:
        values.append(cell_syntax.number(value, dtype) if text else
                      _CONVERT[dtype](value))
      except ValueError:
        if not (text and default is not None):
          self.fail(row, name, f'{value!r} {NOT[dtype]}')
        if not self.unreadable_as_missing:
          self.fail(row, name, f'{value!r} {NOT[dtype]} '
                    '(--unreadable_as_missing reads such cells as missing)')
        self.unreadable.setdefault(name, [0, row])[0] += 1
        present[-1] = False
        values.append(default)
      except OverflowError:
        self.fail(row, name, f'{value!r} is out of the int64 range')
      if dtype == 'int64' and not -2**63 <= values[-1] < 2**63:
        self.fail(row, name, f'{value!r} is out of the int64 range')
    if dtype == 'string':
      return np.array(values, dtype=object)
    array = np.array(values, np.float32 if dtype == 'float32' else np.int64)
    if dtype == 'float32':  # (A missing value's default may be NaN.)
      bad = np.flatnonzero(~np.isfinite(array) & np.array(present, bool))
      if bad.size:
        self.fail(bad[0], name,
                  f'{self.values[name][bad[0]]!r} is not a finite number')
    return array

  def check_labeled(self, name, dtype='string'):
    """Fails on the first row without a value of label column `name` (of
    `dtype`)."""
    missing = [row for row, value in enumerate(self.values[name])
               if self.absent(value, dtype)]
    if missing:
      self.fail(missing[0], name,
                f'no label ({self._absence(self.values[name][missing[0]])}); '
                '--skip_rows_without_label leaves such records out')

  def label(self, name, spec):
    """A label column of `spec`, checked against its classes or head."""
    self.check_labeled(name, spec.label_dtype)
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
