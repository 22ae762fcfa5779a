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

The kinds are Keras FeatureSpace's. `missing_values` (optional): the cells
of a number column that are missing values, besides an empty cell (default:
pandas' list, cell_syntax.MISSING_VALUES).
"""

import dataclasses
import json

import tensorflow as tf
import yaml

from estimator_trainer.errors import UsageError, first_line
# The types and the checks, from their modules: callers read the feature
# spec as a whole here.
from estimator_trainer.tabular.spec_checks import PARTS, check  # pylint: disable=unused-import
from estimator_trainer.tabular.spec_types import (  # pylint: disable=unused-import
    CATEGORICAL_KINDS, FLOAT_KINDS, HASHED_KINDS, HEADS, KINDS, MISSING_INT64,
    Column, Cross, FeatureSpec, kind_dtype)

_KEYS = {'name', 'columns', 'crosses', 'label', 'label_vocabulary', 'weight',
         'head', 'missing_values'}
_COLUMN_KEYS = {'kind', 'num_bins', 'embedding_dim', 'default', 'dtype',
                'missing_indicator', 'vocabulary', 'boundaries', 'num_oov',
                'one_hot', 'oov_value', 'source', 'max_vocabulary',
                'min_frequency', 'parts'}
_CROSS_KEYS = {'columns', 'num_bins', 'embedding_dim'}


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
      'weight': spec.weight, 'head': spec.head,
      'missing_values': spec.missing_values})
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
  for field in ('label', 'label_vocabulary', 'weight', 'head', 'name',
                'missing_values'):
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
        integer(column.get('min_frequency'), f'{key}.min_frequency'),
        column.get('parts')))
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
  missing = values.get('missing_values')
  if missing is not None and not (isinstance(missing, list) and all(
      isinstance(value, str) for value in missing)):
    fail('missing_values', "expected a list of the cells a number column "
         f"reads as missing (e.g. [\"?\"]), got {missing!r}")
  spec = FeatureSpec(tuple(columns), label, tuple(crosses), vocabulary,
                     values.get('weight'), values.get('head'),
                     values.get('name', 'tabular'),
                     missing and tuple(missing))
  check(spec, origin)
  return spec

