"""infer.py's rules: a column's kind, and the head, from its cells (a
table_cells.Cells); each with the words that say why."""

import math
import re

from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.tabular import cell_syntax
from estimator_trainer.tabular import spec as spec_lib

# A CSV column is numbers when at least this share of its present cells
# (missing values aside) read as numbers: a stray word ('unknown', '?')
# among numbers is then a cell the run reports, not a reason to hash the
# numbers; a column of codes with some letters (grades K, 1..12: one in
# 13, 8 %) stays a string column.
MIN_NUMBERS = 0.95
_LIST_DTYPES = {'float_list': 'float32', 'int64_list': 'int64',
                'bytes_list': 'string'}
# A number written with a leading zero (02134, -007) is a code, not a
# number: as a number it would meet 2134.
_LEADING_ZERO = re.compile(r'[+-]?0[0-9]')
# Integers named as ids (store_id, StoreID, zip_code) name things: codes,
# not amounts.
_IDS = (re.compile(r'(?:^|[^a-z0-9])(?:id|ids|code|zip)$', re.IGNORECASE),
        re.compile(r'[a-z0-9](?:Id|ID)$'))


def named_as_ids(name):
  return any(pattern.search(name) for pattern in _IDS)


def dtype_of(name, values, cells, min_numbers=MIN_NUMBERS):
  """(float32, int64 or string, rows of the present cells not read as it):
  the list kind (TFRecords), or what at least `min_numbers` of the present
  CSV cells read as (cell_syntax.py); string where one has a leading
  zero."""
  if name in cells.kinds:
    return _LIST_DTYPES[cells.kinds[name]], []
  rows = [row for row, value in enumerate(values)
          if not cells.absent(value, 'float32')]
  if not rows or any(_LEADING_ZERO.match(values[row]) for row in rows):
    return 'string', []
  numbers = {row for row in rows
             if cell_syntax.readable(values[row], 'float32')}
  if len(numbers) < min_numbers * len(rows):
    return 'string', []
  integers = all(cell_syntax.readable(values[row], 'int64')
                 for row in numbers)
  return ('int64' if integers else 'float32',
          [row for row in rows if row not in numbers])


def _unreadable_note(name, values, cells, unreadable):
  """Says which cells are no numbers, and sets them missing in `cells` (the
  run reads them as the data error they are, or as missing with
  --unreadable_as_missing)."""
  if not unreadable:
    return ''
  row = unreadable[0]
  note = (f'; {len(unreadable)} of {len(values)} cells not numbers (first '
          f'{values[row]!r}, {cells.files[cells.file_index[row]]} '
          f'{cells.unit} {cells.numbers[row]}): the run fails on them, or '
          'with --unreadable_as_missing reads them as missing')
  for row in unreadable:
    values[row] = None
  return note


def column(name, values, cells, max_categorical):
  """(Column or None, why).

  An integer column is a number (standardized), as the baseline a data
  scientist runs first reads it, unless its name says ids (codes then:
  categorical, hashed beyond `max_categorical` distinct values). Measured
  on the real tables of docs/guide/tabular.md#how-infer-reads-the-data:
  survey levels 0-9 read as codes cost caravan 0.05 AUC; a number and a
  categorical view of it, no better elsewhere."""
  dtype, unreadable = dtype_of(name, values, cells)
  if all(cells.absent(v, dtype) for v in values):
    return None, f'left out: no values ({cells.missing} everywhere)'
  bad = _unreadable_note(name, values, cells, unreadable)
  missing = sum(cells.absent(v, dtype) for v in values) - len(unreadable)
  note = f'; {missing} of {len(values)} missing' if missing else ''
  note += bad
  present = [v for v in values if not cells.absent(v, dtype)]
  distinct = len(set(present) if dtype == 'string' or name in cells.kinds
                 else {cell_syntax.number(v, dtype) for v in present})
  if distinct == 1:
    return None, f'left out: one value ({present[0]!r}) in every record'
  if dtype == 'int64' and named_as_ids(name):
    return _codes(name, 'integer', distinct, 'integers named as ids',
                  max_categorical, note)
  if dtype != 'string':
    if dtype == 'float32':
      cells.typed(name, dtype, 0.0)  # Finite numbers, or a DataError.
    imputed = '; imputed with their mean' if missing or bad else ''
    what = 'numbers' if dtype == 'float32' else (
        f'{distinct} distinct integers: numbers')
    # TFRecords' integers are parsed as int64_list (CSV's as numbers).
    as_int64 = dtype == 'int64' and name in cells.kinds
    return (spec_lib.Column(name, 'float_normalized',
                            dtype='int64' if as_int64 else None),
            f'float_normalized ({what}{note}{imputed})')
  codes = any(_LEADING_ZERO.match(v) for v in present)
  what = 'strings' + (' (numbers with leading zeros: codes)' if codes else '')
  return _codes(name, 'string', distinct, what, max_categorical, note)


def _codes(name, kind, distinct, what, max_categorical, note):
  """(Column, why) of codes: `kind`_categorical up to `max_categorical`
  distinct values, else `kind`_hashed into about twice as many bins."""
  if distinct <= max_categorical:
    return (spec_lib.Column(name, f'{kind}_categorical'),
            f'{kind}_categorical ({distinct} distinct {what} <= '
            f'{max_categorical}{note})')
  num_bins = 2 ** math.ceil(math.log2(2 * distinct))
  return (spec_lib.Column(name, f'{kind}_hashed', num_bins=num_bins),
          f'{kind}_hashed, num_bins {num_bins} ({distinct} distinct {what} '
          f'> {max_categorical}: a power of 2 about twice that{note})')


def label_dtype(name, cells):
  """A label column's dtype: numbers only if every present cell is one (a
  word there is a class); int64 if each is an integer as Python reads it
  ('+1': a label of integers not class ids keeps them as written, in its
  vocabulary)."""
  dtype = dtype_of(name, cells.values[name], cells, min_numbers=1)[0]
  if dtype == 'float32' and name not in cells.kinds:
    try:
      for value in cells.values[name]:
        if not cells.absent(value, dtype):
          int(value)
      return 'int64'
    except ValueError:
      pass
  return dtype


def head(labels, cells, head_flag, max_categorical, max_codes, where=''):
  """(head, label_vocabulary, why) of the label column(s); `where` says of
  which records, if not all (for a label of one value)."""
  if len(labels) > 1:
    if head_flag not in (None, 'multilabel'):
      raise UsageError(f'--head={head_flag} takes one label column, got '
                       f'{", ".join(labels)}')
    for name in labels:
      cells.label(name, spec_lib.FeatureSpec((), labels, head='multilabel'))
    return 'multilabel', None, f'multilabel ({len(labels)} label columns)'
  name = labels[0]
  dtype = label_dtype(name, cells)
  cells.check_labeled(name, dtype)
  if dtype == 'int64' and name not in cells.kinds:  # As label_dtype reads.
    classes = sorted({int(v) for v in cells.values[name]})
  else:
    classes = sorted(set(cells.typed(name, dtype).tolist()))
  if len(classes) < 2:
    raise DataError(f'{cells.files[0]}: the label {name!r} has one value '
                    f'({classes[0]!r}) in every record{where}')
  chosen = head_flag or ('binary' if len(classes) == 2 else 'multiclass')
  if dtype == 'string':
    return (chosen, tuple(classes),
            f'{chosen} ({len(classes)} distinct strings: the label '
            f'vocabulary, sorted: {", ".join(classes)})')
  if head_flag in (None, 'binary', 'multiclass') and dtype == 'int64':
    # Class ids are parsed by TensorFlow, which reads no '+1'.
    ids = name in cells.kinds or all(cell_syntax.readable(v, 'int64')
                                     for v in cells.values[name])
    if ids and classes == list(range(len(classes))) and (
        head_flag or len(classes) <= max_categorical):
      return chosen, None, f'{chosen} (integers 0..{len(classes) - 1})'
    if head_flag or len(classes) <= max_codes:
      if name in cells.kinds:  # An int64_list: parsed as class ids only.
        raise DataError(
            f"{cells.files[0]}: the label {name!r} has the integers "
            f"{', '.join(map(str, classes[:5]))}{', ...' * (len(classes) > 5)}"
            ', not class ids 0..K-1: write them as class ids, or as strings '
            '(a bytes_list: the label vocabulary), or pass --head=regression')
      # The cells as written ('+1' stays '+1'): what the label parses as.
      vocabulary = tuple(sorted(set(cells.values[name]),
                                key=lambda v: (int(v), v)))
      return (chosen, vocabulary,
              f'{chosen} ({len(classes)} distinct integers, not 0..K-1: the '
              f'label vocabulary, sorted: {", ".join(vocabulary)})')
  if head_flag in (None, 'regression'):
    why = (f'{len(classes)} distinct integers > {max_codes}' if dtype ==
           'int64' else 'numbers')
    return 'regression', None, ('regression' if head_flag else
                                f'regression ({why})')
  return head_flag, None, f'{head_flag} (--head)'
