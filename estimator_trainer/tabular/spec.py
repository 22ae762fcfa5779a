"""The feature spec: what a person writes (or `infer` writes for them) to
describe tabular data: per column its kind, the crosses, the label, an
optional weight column and, for string labels, the label vocabulary.

JSON (one object; columns in order):

  {"name": "census",
   "columns": {"age": {"kind": "float_normalized"},
               "education": {"kind": "string_categorical", "embedding_dim": 8},
               "zip": {"kind": "string_hashed", "num_bins": 100000}},
   "crosses": [{"columns": ["education", "zip"], "num_bins": 1000}],
   "label": "income", "label_vocabulary": ["<=50K", ">50K"],
   "weight": "fnlwgt", "head": "binary"}

The kinds are Keras FeatureSpace's.
"""

import dataclasses
import json
import math
from typing import Optional, Tuple, Union

import tensorflow as tf
import yaml

from estimator_trainer import config
from estimator_trainer.errors import UsageError, first_line

FLOAT_KINDS = ('float', 'float_normalized', 'float_discretized')
CATEGORICAL_KINDS = ('integer_categorical', 'string_categorical')
HASHED_KINDS = ('string_hashed', 'integer_hashed')
KINDS = FLOAT_KINDS + CATEGORICAL_KINDS + HASHED_KINDS
# A missing number of a float kind read as int64 (NaN has no int64): the
# encoder fills it as it fills a float32 NaN.
MISSING_INT64 = -2**63
HEADS = config.HEADS


@dataclasses.dataclass(frozen=True)
class Column:
  """One input column. `num_bins`: of a hashed or discretized column (its
  ids' range); `embedding_dim`: its embedding's width in the deep part of
  `dnn` and `wide_deep` (None: the model's default); `default`: the value
  of a missing cell or feature (None: the kind's: 0.0, '' or -1, which
  look up as out-of-vocabulary); `dtype`: the raw value's dtype name,
  float32, int64 or string, the kind's unless given (a float kind's may
  be int64: integers of TFRecords' int64_list used as numbers);
  `missing_indicator`: a float or float_normalized column's input also
  says, 1 or 0, whether the value was missing (and filled).

  Given rather than computed (a canned Estimator's feature columns give
  them: tabular/feature_columns.py): `vocabulary` of a categorical column,
  in its order; `boundaries` of a float_discretized one (num_bins then
  len(boundaries) + 1); `num_oov`, a categorical column's out-of-vocabulary
  ids (None: 1; several: a string hashes to one); `one_hot`, an id column
  enters the deep part one-hot (canned indicator_column), not embedded;
  `oov_value`, a value of the given vocabulary that an unknown value looks
  up as (canned's default_value), a missing one ('' or -1) still out of
  vocabulary; `source`, the data's column a float_discretized column of
  given boundaries reads if not its own (a second column of one feature:
  canned's numeric_column('age') and a bucketized_column of it are 'age'
  and 'age_bucketized' of source 'age').

  A computed vocabulary (string_categorical, integer_categorical) keeps
  the values seen `min_frequency` times or more (None: 1), the
  `max_vocabulary` most frequent of them (None: all), as tf.Transform's
  vocabulary(frequency_threshold, top_k): the rest look up as
  out-of-vocabulary."""

  name: str
  kind: str
  num_bins: Optional[int] = None
  embedding_dim: Optional[int] = None
  default: Union[float, int, str, None] = None
  dtype: Optional[str] = None
  missing_indicator: bool = False
  vocabulary: Optional[Tuple[Union[str, int], ...]] = None
  boundaries: Optional[Tuple[float, ...]] = None
  num_oov: Optional[int] = None
  one_hot: bool = False
  oov_value: Union[str, int, None] = None
  source: Optional[str] = None
  max_vocabulary: Optional[int] = None
  min_frequency: Optional[int] = None

  def __post_init__(self):
    if self.dtype is None:
      object.__setattr__(self, 'dtype', kind_dtype(self.kind))
    for field in ('vocabulary', 'boundaries'):
      if isinstance(getattr(self, field), list):  # JSON's lists.
        object.__setattr__(self, field, tuple(getattr(self, field)))
    if self.boundaries is not None and self.num_bins is None:
      object.__setattr__(self, 'num_bins', len(self.boundaries) + 1)


def kind_dtype(kind):
  """A kind's raw dtype name: float32, int64 or string."""
  if kind in FLOAT_KINDS:
    return 'float32'
  return 'string' if kind.startswith('string') else 'int64'


@dataclasses.dataclass(frozen=True)
class Cross:
  """A hashed cross of categorical columns (Keras HashedCrossing)."""

  columns: Tuple[str, ...]
  num_bins: int
  embedding_dim: Optional[int] = None

  @property
  def name(self):
    return '_X_'.join(self.columns)


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  """Columns, crosses, the label (one column; for multilabel, a tuple of
  0/1 columns), `label_vocabulary` (string labels' classes, in order), an
  optional `weight` column and the `head` the data is for (None: --head
  decides)."""

  columns: Tuple[Column, ...]
  label: Union[str, Tuple[str, ...]]
  crosses: Tuple[Cross, ...] = ()
  label_vocabulary: Optional[Tuple[str, ...]] = None
  weight: Optional[str] = None
  head: Optional[str] = None
  name: str = 'tabular'

  @property
  def label_columns(self):
    """The label's columns: one, or multilabel's several."""
    return (self.label,) if isinstance(self.label, str) else self.label

  @property
  def label_dtype(self):
    """The raw label's dtype name: string with a label vocabulary, float32
    for regression, int64 otherwise (class ids; multilabel's 0/1 each)."""
    if self.label_vocabulary:
      return 'string'
    return 'float32' if self.head == 'regression' else 'int64'

  @property
  def data_columns(self):
    """The feature columns read from the data: all but those of a
    `source`."""
    return tuple(c for c in self.columns if c.source is None)

  @property
  def names(self):
    """Every column of the data the spec names: features, label(s),
    weight."""
    return (tuple(c.name for c in self.data_columns) + self.label_columns +
            ((self.weight,) if self.weight else ()))


_KEYS = {'name', 'columns', 'crosses', 'label', 'label_vocabulary', 'weight',
         'head'}
_COLUMN_KEYS = {'kind', 'num_bins', 'embedding_dim', 'default', 'dtype',
                'missing_indicator', 'vocabulary', 'boundaries', 'num_oov',
                'one_hot', 'oov_value', 'source', 'max_vocabulary',
                'min_frequency'}
_CROSS_KEYS = {'columns', 'num_bins', 'embedding_dim'}
_BINNED_KINDS = HASHED_KINDS + ('float_discretized',)


def read(path):
  """The FeatureSpec in a JSON file (YAML if it ends .yaml or .yml)."""
  try:
    with tf.io.gfile.GFile(path) as f:
      text = f.read()
  except (OSError, tf.errors.OpError) as e:
    raise UsageError(f'{path}: cannot read the feature spec '
                     f'({first_line(e)})') from None
  return loads(text, path, yaml_format=path.endswith(('.yaml', '.yml')))


def loads(text, origin='feature spec', yaml_format=False):
  """The FeatureSpec of JSON (or YAML) `text`, checked; errors name
  `origin` (the file) and the key."""
  try:
    if yaml_format:
      values = yaml.safe_load(text)
    else:
      values = json.loads(text)
  except (ValueError, yaml.YAMLError) as e:
    raise UsageError(f'{origin}: not {"YAML" if yaml_format else "JSON"} '
                     f'({" ".join(str(e).split())})') from None
  return from_dict(values, origin)


def to_json(spec):
  """`spec` as JSON that `loads` reads back equal; unset fields left out."""
  columns = {}
  for column in spec.columns:
    values = dataclasses.asdict(column)
    del values['name']
    if values['dtype'] == kind_dtype(column.kind):
      del values['dtype']  # The kind's: said by the kind.
    for flag in ('missing_indicator', 'one_hot'):
      if not values[flag]:
        del values[flag]
    if column.boundaries is not None:
      del values['num_bins']  # Said by the boundaries.
    columns[column.name] = _set(values)
  values = _set({
      'name': spec.name, 'columns': columns,
      'crosses': [_set(dataclasses.asdict(c)) for c in spec.crosses],
      'label': spec.label, 'label_vocabulary': spec.label_vocabulary,
      'weight': spec.weight, 'head': spec.head})
  # A column or a cross a line: easy to read and edit.
  lines = []
  for key, value in values.items():
    if key in ('columns', 'crosses'):
      items = (value.items() if key == 'columns' else
               ((None, item) for item in value))
      inner = ',\n'.join(
          '  ' + (f'{json.dumps(name)}: ' if name is not None else '') +
          json.dumps(item) for name, item in items)
      opening, closing = '{}' if key == 'columns' else '[]'
      lines.append(f' "{key}": {opening}\n{inner}\n {closing}')
    else:
      lines.append(f' {json.dumps(key)}: {json.dumps(value)}')
  return '{\n' + ',\n'.join(lines) + '\n}\n'


def _set(values):
  return {k: v for k, v in values.items() if v is not None and v != []}


def _fields(item):
  """A column's or cross's fields but those its name is of."""
  return {k: v for k, v in dataclasses.asdict(item).items()
          if k not in ('name', 'columns')}


def differences(old, new):
  """What `new` changes of `old` (FeatureSpecs), a phrase each, e.g.
  'columns.x.kind float_normalized -> float', 'column y added',
  'label_vocabulary order'. The order of columns and crosses is none: the
  models take their inputs by name (and the JSON's key order or layout
  never reach a FeatureSpec)."""
  found = []
  for key, singular in (('columns', 'column'), ('crosses', 'cross')):
    before = {item.name: _fields(item) for item in getattr(old, key)}
    after = {item.name: _fields(item) for item in getattr(new, key)}
    found += [f'{singular} {name} removed' for name in before
              if name not in after]
    found += [f'{singular} {name} added' for name in after
              if name not in before]
    found += [f'{key}.{name}.{field} {_shown(was)} -> '
              f'{_shown(after[name][field])}'
              for name, fields in before.items() if name in after
              for field, was in fields.items()
              if after[name][field] != was]
  for field in ('label', 'label_vocabulary', 'weight', 'head', 'name'):
    was, now = getattr(old, field), getattr(new, field)
    if was == now:
      continue
    if field == 'label_vocabulary' and was and now and sorted(
        was) == sorted(now):
      found.append('label_vocabulary order')
    else:
      found.append(f'{field} {_shown(was)} -> {_shown(now)}')
  return found


def _shown(value):
  if value is None:
    return 'unset'
  return value if isinstance(value, str) else json.dumps(value)


def from_dict(values, origin='feature spec'):
  """The FeatureSpec of a decoded JSON object, checked (see `check`)."""

  def fail(key, message):
    raise UsageError(f'{origin}: {key}: {message}')

  def keys(obj, key, known):
    if not isinstance(obj, dict):
      fail(key, f'expected an object, got {obj!r}')
    for name in obj:
      if name not in known:
        fail(f'{key}.{name}' if key else name,
             f'unknown key; the keys: {", ".join(sorted(known))}')

  def integer(value, key):
    if value is not None and (not isinstance(value, int) or
                              isinstance(value, bool) or value < 1):
      fail(key, f'expected a positive integer, got {value!r}')
    return value

  keys(values, '', _KEYS)
  if not values.get('columns'):
    fail('columns', 'missing; it maps each column to its kind')
  if not isinstance(values['columns'], dict):
    fail('columns', f'expected an object of column: {{"kind": ...}}, got '
         f'{values["columns"]!r}')
  columns = []
  for name, column in values['columns'].items():
    key = f'columns.{name}'
    keys(column, key, _COLUMN_KEYS)
    if 'kind' not in column:
      fail(f'{key}.kind', f'missing; the kinds: {", ".join(KINDS)}')
    columns.append(Column(
        name, column['kind'], integer(column.get('num_bins'),
                                      f'{key}.num_bins'),
        integer(column.get('embedding_dim'), f'{key}.embedding_dim'),
        column.get('default'), column.get('dtype'),
        column.get('missing_indicator', False), column.get('vocabulary'),
        column.get('boundaries'),
        integer(column.get('num_oov'), f'{key}.num_oov'),
        column.get('one_hot', False), column.get('oov_value'),
        column.get('source'),
        integer(column.get('max_vocabulary'), f'{key}.max_vocabulary'),
        integer(column.get('min_frequency'), f'{key}.min_frequency')))
  crosses = []
  if not isinstance(values.get('crosses', []), list):
    fail('crosses', f'expected a list, got {values["crosses"]!r}')
  for i, cross in enumerate(values.get('crosses', [])):
    key = f'crosses[{i}]'
    keys(cross, key, _CROSS_KEYS)
    if not isinstance(cross.get('columns'), list):
      fail(f'{key}.columns', 'expected a list of column names')
    if cross.get('num_bins') is None:
      fail(f'{key}.num_bins', 'missing; a cross hashes into num_bins ids')
    crosses.append(Cross(tuple(cross['columns']),
                         integer(cross['num_bins'], f'{key}.num_bins'),
                         integer(cross.get('embedding_dim'),
                                 f'{key}.embedding_dim')))
  if 'label' not in values:
    fail('label', 'missing; the label column (multilabel: a list of them)')
  label = values['label']
  vocabulary = values.get('label_vocabulary')
  if isinstance(label, list):
    label = tuple(label)
  if vocabulary is not None and not isinstance(vocabulary, list):
    fail('label_vocabulary', f'expected a list of the classes, got '
         f'{vocabulary!r}')
  if vocabulary is not None:
    vocabulary = tuple(vocabulary)
  spec = FeatureSpec(tuple(columns), label, tuple(crosses), vocabulary,
                     values.get('weight'), values.get('head'),
                     values.get('name', 'tabular'))
  check(spec, origin)
  return spec


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


def _check_source(column, source, fail):
  key = f'columns.{column.name}.source'
  if not source or source.source is not None:
    fail(key, f'no column {column.source!r} of the data in columns')
  if column.kind != 'float_discretized' or column.boundaries is None or (
      source.kind not in FLOAT_KINDS):
    fail(key, 'only a float_discretized column of given boundaries reads '
         'another float column')
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
