"""The spec items of a canned model's feature columns, collected by name
(tabular/feature_columns.py reads each column): one item a feature, its
parts joined, or, where the wide and the deep part's columns of a feature
differ, the deep part's a second column of it; what cannot be one spec is
a one-line UsageError naming the column."""

import dataclasses

from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import spec as spec_lib


def fail(column, message):
  raise UsageError(f'feature column {getattr(column, "name", column)!r}: '
                   f'{message}')


# How one feature enters the deep part: the fields two canned columns of it
# may set apart (a linear part's categorical column, the deep part's
# embedding of it); every other field must be the same in both (else the
# deep part's is a column of its own, below), but for `parts`, joined.
_USES = ('embedding_dim', 'one_hot')
# The spec's fields as the feature columns name them, for the error.
_CANNED_FIELDS = {'oov_value': 'default_value', 'default': 'default_value',
                  'num_oov': 'num_oov_buckets'}


def _differ(old, new):
  """Whether two canned columns of one feature differ but in how each part
  takes it."""
  return any(was != new.__dict__[field] for field, was in old.__dict__.items()
             if field not in _USES + ('parts',))


def _merged(old, new, name):
  """One spec item of two canned columns of the same feature (e.g. the
  linear part's categorical column and the deep part's embedding of it):
  their fields, which must agree but for how each part takes it."""
  merged = {}
  for field, was in old.__dict__.items():
    value = new.__dict__[field]
    if field == 'parts':  # Both parts: None, as a column of no part.
      joined = set(was or spec_lib.PARTS) | set(value or spec_lib.PARTS)
      merged[field] = None if joined == set(spec_lib.PARTS) else was
    elif was == value or field in _USES and was in (None, False):
      merged[field] = value
    elif field in _USES and value in (None, False):
      merged[field] = was
    else:
      shown = _CANNED_FIELDS.get(field, field)
      fail(name, f'{shown} {was!r} in one column of it and {value!r} in '
            'another (e.g. one part\'s): the spec has one column a feature, '
            'so both parts must agree')
  if merged.get('one_hot') and merged.get('embedding_dim'):
    fail(name, 'both embedded and one-hot: the spec has one column a '
          'feature')
  return type(old)(**merged)


class Builder:
  """Collects spec columns and crosses by name."""

  def __init__(self):
    self.items = {'columns': {}, 'crosses': {}}

  def add(self, item, key='columns', deep_name=None):
    """Adds spec `item`; `deep_name`: canned's name of the deep part's
    column it is (an embedding or indicator column's)."""
    items = self.items[key]
    kinds = {item.kind, items[item.name].kind} if item.name in items else {}
    if kinds == {'float', 'float_discretized'}:
      # A numeric_column and a bucketized_column of one feature: the
      # bucketized one is a second column of it, named as canned's.
      if item.kind == 'float':
        item, items[item.name] = items.pop(item.name), item
      item = dataclasses.replace(item, name=f'{item.name}_bucketized',
                                 source=item.name)
    old = items.get(item.name)
    if (old is not None and deep_name and old.parts == ('linear',) and
        _differ(old, item)):
      # Wide & deep's two columns of one feature that differ (a
      # default_value of one part): the deep part's reads it under its
      # canned name, each part taking its own.
      item = dataclasses.replace(item, name=deep_name, source=item.name)
      old = items.get(deep_name)
    items[item.name] = (_merged(old, item, item.name) if old is not None
                        else item)

  def cross(self, column, embedding_dim=None):
    if column.hash_key is not None:
      fail(column, 'a hash_key of its own has no counterpart (Keras '
            'HashedCrossing hashes with the default one)')
    keys = tuple(column.keys)
    if not all(isinstance(key, str) for key in keys):
      fail(column, 'crosses of feature columns (their ids) have no '
            'counterpart; cross the features by name')
    self.add(spec_lib.Cross(keys, column.hash_bucket_size, embedding_dim),
             'crosses')
