"""The checks of a feature spec (spec.check): each inconsistency a
one-line UsageError naming the key."""

import math

from estimator_trainer.errors import UsageError
from estimator_trainer.tabular.spec_types import (CATEGORICAL_KINDS,
                                                  FLOAT_KINDS, HASHED_KINDS,
                                                  HEADS, KINDS, kind_dtype)

_BINNED_KINDS = HASHED_KINDS + ('float_discretized',)
PARTS = ('linear', 'dnn')  # wide_deep's (models/tabular.py).


def check(spec, origin='feature spec'):
  """Raises a one-line UsageError naming `origin` and the key of the first
  inconsistency in `spec`."""

  def fail(key, message):
    raise UsageError(f'{origin}: {key}: {message}')

  if not isinstance(spec.name, str):
    fail('name', f'expected a string, got {spec.name!r}')
  if spec.head is not None and spec.head not in HEADS:
    fail('head', f'unknown head {spec.head!r}; the heads: {", ".join(HEADS)}')
  by_name = {}
  for column in spec.columns:
    key = f'columns.{column.name}'
    if column.name in by_name:
      fail(key, 'named twice')
    by_name[column.name] = column
    if column.kind not in KINDS:
      fail(f'{key}.kind', f'unknown kind {column.kind!r}; the kinds: '
           f'{", ".join(KINDS)}')
    if column.dtype != kind_dtype(column.kind) and not (
        column.kind in FLOAT_KINDS and column.dtype == 'int64'):
      fail(f'{key}.dtype', f'a {column.kind} column is of '
           f'{kind_dtype(column.kind)}'
           + (' (or int64)' if column.kind in FLOAT_KINDS else '')
           + f', not {column.dtype!r}')
    if column.kind in _BINNED_KINDS and not column.num_bins:
      fail(f'{key}.num_bins', f'missing; a {column.kind} column needs it')
    if column.kind not in _BINNED_KINDS and column.num_bins is not None:
      fail(f'{key}.num_bins', f'only for {", ".join(_BINNED_KINDS)} columns, '
           f'not {column.kind}')
    if column.kind == 'float_discretized' and column.num_bins < 2:
      fail(f'{key}.num_bins', f'needs at least 2 bins, got {column.num_bins}')
    if column.embedding_dim and column.kind in ('float', 'float_normalized'):
      fail(f'{key}.embedding_dim', f'a {column.kind} column has no ids to '
           'embed')
    if column.missing_indicator is not False:
      if column.missing_indicator is not True:
        fail(f'{key}.missing_indicator', 'expected true or false, got '
             f'{column.missing_indicator!r}')
      if column.kind not in ('float', 'float_normalized'):
        fail(f'{key}.missing_indicator', 'only for float and '
             f'float_normalized columns, not {column.kind}')
      if column.default is not None:
        fail(f'{key}.missing_indicator', 'a column with a default has no '
             'missing values to indicate')
    _check_given(column, key, fail)
    if column.default is not None and not _fits(column.default, column.dtype):
      fail(f'{key}.default', f'{column.default!r} is not a {column.dtype} '
           f'value (the kind {column.kind})')
  for column in spec.columns:
    if column.source is not None:
      _check_source(column, isinstance(column.source, str) and
                    by_name.get(column.source), fail)
  for i, cross in enumerate(spec.crosses):
    if len(cross.columns) < 2:
      fail(f'crosses[{i}].columns', 'a cross needs at least 2 columns')
    for name in cross.columns:
      if name not in by_name:
        fail(f'crosses[{i}].columns', f'no column {name!r} in columns')
      if by_name[name].kind in FLOAT_KINDS:
        fail(f'crosses[{i}].columns', f'{name!r} is a {by_name[name].kind} '
             'column; crosses take categorical and hashed columns')
  labels = spec.label if isinstance(spec.label, tuple) else (spec.label,)
  if not labels or not all(isinstance(n, str) and n for n in labels):
    fail('label', f'expected a column name (multilabel: a list of them), '
         f'got {spec.label!r}')
  if len(set(labels)) != len(labels):
    fail('label', 'a column named twice')
  if (spec.head == 'multilabel') != (not isinstance(spec.label, str)):
    fail('label', 'multilabel takes a list of 0/1 columns, the other heads '
         f'one column; got {spec.label!r} for the head {spec.head}')
  for name in labels:
    if name in by_name:
      fail('label', f'{name!r} is also a feature column')
  if spec.weight is not None:
    if not isinstance(spec.weight, str) or not spec.weight:
      fail('weight', f'expected a column name, got {spec.weight!r}')
    if spec.weight in by_name or spec.weight in labels:
      fail('weight', f'{spec.weight!r} is also a feature or label column')
  vocabulary = spec.label_vocabulary
  if vocabulary is not None:
    if spec.head in ('regression', 'multilabel'):
      fail('label_vocabulary', f'not for the head {spec.head}')
    if (len(vocabulary) < 2 or len(set(vocabulary)) != len(vocabulary) or
        not all(isinstance(v, str) for v in vocabulary)):
      fail('label_vocabulary', 'expected 2 or more distinct strings, got '
           f'{list(vocabulary)!r}')
    if spec.head == 'binary' and len(vocabulary) != 2:
      fail('label_vocabulary', f'a binary head has 2 classes, got '
           f'{len(vocabulary)}')


def _check_given(column, key, fail):
  """The fields a canned Estimator's columns give (see Column)."""
  if column.vocabulary is not None:
    if column.kind not in CATEGORICAL_KINDS:
      fail(f'{key}.vocabulary', f'only for categorical columns, not '
           f'{column.kind}')
    if not column.vocabulary or not all(
        _fits(v, column.dtype) for v in column.vocabulary):
      fail(f'{key}.vocabulary', f'expected a non-empty list of '
           f'{column.dtype} values')
    if len(set(column.vocabulary)) != len(column.vocabulary):
      fail(f'{key}.vocabulary', 'a value listed twice')
  if column.boundaries is not None:
    if column.kind != 'float_discretized':
      fail(f'{key}.boundaries', f'only for float_discretized columns, not '
           f'{column.kind}')
    values = column.boundaries
    if (not values or not all(_fits(v, 'float32') for v in values) or
        list(values) != sorted(set(values))):
      fail(f'{key}.boundaries', 'expected increasing numbers')
    if column.num_bins != len(values) + 1:
      fail(f'{key}.num_bins', f'{column.num_bins}, but {len(values)} '
           'boundaries make len(boundaries) + 1 bins')
  if column.num_oov is not None:
    if column.kind not in CATEGORICAL_KINDS:
      fail(f'{key}.num_oov', f'only for categorical columns, not '
           f'{column.kind}')
    if column.num_oov > 1 and column.dtype != 'string':
      # IntegerLookup spreads them by modulo, canned by hash: no counterpart.
      fail(f'{key}.num_oov', 'more than 1 only for string columns')
  if column.oov_value is not None:
    if column.vocabulary is None or column.oov_value not in column.vocabulary:
      fail(f'{key}.oov_value', f'{column.oov_value!r} is not in the column\'s '
           'given vocabulary')
    if column.num_oov is not None:
      fail(f'{key}.oov_value', 'an unknown value looks up as oov_value or '
           'in one of num_oov ids, not both')
  for field in ('max_vocabulary', 'min_frequency'):
    if getattr(column, field) is not None and (
        column.kind not in CATEGORICAL_KINDS or column.vocabulary is not None):
      fail(f'{key}.{field}', 'only for a categorical column whose '
           'vocabulary is computed (not given, not hashed)')
  if column.one_hot not in (False, True):
    fail(f'{key}.one_hot', f'expected true or false, got {column.one_hot!r}')
  if column.one_hot and column.kind in ('float', 'float_normalized'):
    fail(f'{key}.one_hot', f'a {column.kind} column has no ids')
  parts = column.parts
  if parts is not None and (not isinstance(parts, tuple) or not parts or
                            not set(parts) <= set(PARTS) or
                            len(set(parts)) != len(parts)):
    fail(f'{key}.parts', f'a list of {" or ".join(PARTS)} (the parts of '
         f'wide_deep that take it), got {parts!r}')


def _check_source(column, source, fail):
  key = f'columns.{column.name}.source'
  if not source or source.source is not None:
    fail(key, f'no column {column.source!r} of the data in columns')
  given = (column.kind == 'float_discretized' and column.boundaries and
           source.kind in FLOAT_KINDS) or (
               (column.kind in HASHED_KINDS or column.kind in
                CATEGORICAL_KINDS and column.vocabulary) and
               source.kind in CATEGORICAL_KINDS + HASHED_KINDS)
  if not given:
    fail(key, 'only a float_discretized column of given boundaries reads '
         'another float column, and only a hashed or categorical column of '
         'a given vocabulary another categorical or hashed one')
  if (column.dtype, column.default) != (source.dtype, source.default):
    fail(key, f'its dtype and default are those of {source.name!r}')


def _fits(value, dtype):
  if dtype == 'string':
    return isinstance(value, str)
  if isinstance(value, bool):
    return False
  return isinstance(value, int) or (dtype == 'float32' and
                                    isinstance(value, float) and
                                    math.isfinite(value))
