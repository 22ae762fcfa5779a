"""What a CSV cell of a number column may hold, one rule for every reader
(infer, the statistics pass's Arrow, TensorFlow and Python reads, and
training's parser): a missing value, or a number as TensorFlow's parser
reads it (tf.io.decode_csv and tf.strings.to_number: safe_strtof and
safe_strto64), which training uses, so that nothing passes the statistics
that training cannot parse.
"""

import re

from estimator_trainer import stack

# Cells that are a missing value in a number column: pandas' read_csv
# default na_values (1.5; 'None' since 2.0), which are Arrow's CSV
# null_values with '<NA>' and 'None'. A string column's only missing value
# is an empty cell: there 'NA' may be a value.
MISSING_VALUES = ('', '#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN',
                  '-NaN', '-nan', '1.#IND', '1.#QNAN', '<NA>', 'N/A', 'NA',
                  'NULL', 'NaN', 'None', 'n/a', 'nan', 'null')


def missing_values(given=None):
  """The cells of a number column that are missing values: a feature
  spec's `missing_values` (None: MISSING_VALUES) and an empty cell."""
  if given is None:
    return MISSING_VALUES
  return tuple(dict.fromkeys(('',) + tuple(given)))


def missing_syntax(values):
  """Missing `values` as a regular expression (RE2's and Python's): in the
  graph, one pass a cell (equality with each took 2.5 times the parse of 6
  columns)."""
  return '|'.join(map(re.escape, values))

# TensorFlow's number syntax (RE2's and Python's alike): ASCII digits only,
# spaces around allowed. A float: a sign, decimal or hex digits, inf or nan
# in any case. An int64: '-' and decimal digits, in the int64 range.
# TensorFlow 2.16+ (absl's SimpleAtof/SimpleAtoi) also reads 'infinity', an
# int64's '+' and floats of any length (tests/test_tabular_cells.py checks
# the syntax against the stack's own parser).
_NEWER = not stack.before_2_16()
_SPACE = r'[ \t\n\v\f\r]*'
FLOAT_SYNTAX = (_SPACE + r'[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)'
                r'(?:[eE][+-]?[0-9]+)?|0[xX][0-9a-fA-F]+|(?i:inf' +
                ('(?:inity)?' if _NEWER else '') + r'|nan))' + _SPACE)
INT_SYNTAX = _SPACE + ('[+-]?' if _NEWER else '-?') + r'[0-9]+' + _SPACE
# 2.15's safe_strtof reads no longer text (its buffer's size).
MAX_FLOAT_CHARS = 2**31 - 1 if _NEWER else 31
_FLOAT = re.compile(FLOAT_SYNTAX)
_INT = re.compile(INT_SYNTAX)


def number(text, dtype):
  """The number (float, or int for 'int64') TensorFlow reads from cell
  `text`; ValueError if it reads none, OverflowError out of int64."""
  if dtype == 'int64':
    if not _INT.fullmatch(text):
      raise ValueError(text)
    value = int(text)
    if not -2**63 <= value < 2**63:
      raise OverflowError(text)
    return value
  if len(text) > MAX_FLOAT_CHARS or not _FLOAT.fullmatch(text):
    raise ValueError(text)
  text = text.strip(' \t\n\v\f\r')
  digits = text.lstrip('+-')
  if digits[:2] in ('0x', '0X'):
    return float(int(digits, 16)) * (-1 if text[0] == '-' else 1)
  return float(text)


def readable(text, dtype):
  """Whether `number(text, dtype)` reads a number."""
  try:
    number(text, dtype)
    return True
  except (ValueError, OverflowError):
    return False
