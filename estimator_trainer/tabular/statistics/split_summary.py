"""SplitSummary: the summaries (summaries.py) of one split under a feature
spec, added to batch by batch and merged across files, tasks or Beam
workers; statistics.of_summary makes the Statistics of it."""

import numpy as np

from estimator_trainer.errors import DataError
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.statistics import summaries

# Tokens the lookup layers reserve or that mark a missing value (the kind's
# default): never vocabulary entries, so they look up as out-of-vocabulary.
STRING_MISSING, INTEGER_MISSING = '', -1


def missing_numbers(values):
  """The mask of a float column's missing values (parsing.feature_default's:
  NaN, or MISSING_INT64 parsed as an int64)."""
  values = np.asarray(values, np.float64)
  return np.isnan(values) | (values == float(spec_lib.MISSING_INT64))


def strings(values):
  return np.array([v.decode() if isinstance(v, bytes) else str(v)
                   for v in values], dtype=object)


def head_of(feature_spec, head=None):
  return head or feature_spec.head or 'multiclass'


class SplitSummary:
  """Per column of `feature_spec` the summary its statistics need, the
  number of rows, and the label's: its largest class id (an integer label
  of a classification `head` without a vocabulary) or its moments
  (regression)."""

  def __init__(self, feature_spec, head=None):
    self.head = head_of(feature_spec, head)
    self.rows = 0
    self.numbers, self.counts = {}, {}
    for column in feature_spec.data_columns:
      if column.kind in spec_lib.FLOAT_KINDS:
        self.numbers[column.name] = summaries.Numbers(
            quantiles=column.kind == 'float_discretized')
      elif column.kind in spec_lib.CATEGORICAL_KINDS:
        self.counts[column.name] = summaries.Counts()
    self.label = feature_spec.label if isinstance(feature_spec.label,
                                                  str) else None
    self.class_ids = bool(
        self.head in ('multiclass', 'binary') and self.label and
        feature_spec.label_vocabulary is None and
        feature_spec.label_dtype in ('int64', 'float32'))
    self.max_class = 0
    self.labels = (summaries.Numbers() if self.head == 'regression' and
                   self.label else None)
    self._defaults = {c.name: c.default is not None
                      for c in feature_spec.data_columns}

  def add(self, batch, rows):
    """Adds `rows` rows: `batch` maps a float column to its values (missing
    ones as parsing.feature_default gives them), a categorical column to
    its values or to (distinct values, their counts), the label column to
    its values."""
    self.rows += int(rows)
    for name, numbers in self.numbers.items():
      values = np.asarray(batch[name], np.float64)
      numbers.add(values if self._defaults[name] else
                  values[~missing_numbers(values)])
    for name, counts in self.counts.items():
      values = batch[name]
      if isinstance(values, tuple):
        counts.add(*values)
      else:
        counts.add(values)
    if self.class_ids:
      self.max_class = max(self.max_class,
                           _max_class_id(self.label, batch[self.label],
                                         self.head))
    if self.labels is not None:
      self.labels.add(batch[self.label])

  def add_columns(self, columns):
    """Adds a whole split's `columns` as TabularSource.columns gives them."""
    batch = dict(columns)
    for name, counts in self.counts.items():
      if columns[name].dtype == object:
        batch[name] = strings(columns[name])
    self.add(batch, len(next(iter(columns.values()))))

  def merge(self, other):
    self.rows += other.rows
    for name, numbers in self.numbers.items():
      numbers.merge(other.numbers[name])
    for name, counts in self.counts.items():
      counts.merge(other.counts[name])
    self.max_class = max(self.max_class, other.max_class)
    if self.labels is not None:
      self.labels.merge(other.labels)
    return self

  def to_dict(self):
    """JSON types (summaries' to_dict): what this split's data added; the
    rest is the spec's and the head's."""
    return {'rows': self.rows, 'max_class': self.max_class,
            'numbers': {name: numbers.to_dict()
                        for name, numbers in self.numbers.items()},
            'counts': {name: counts.to_dict()
                       for name, counts in self.counts.items()},
            'labels': self.labels and self.labels.to_dict()}

  @classmethod
  def from_dict(cls, feature_spec, head, data):
    """The SplitSummary of `to_dict`'s `data` under `feature_spec` and
    `head`; ValueError, TypeError or LookupError on other data, or on a
    summary of other columns."""
    summary = cls(feature_spec, head)
    summary.rows = summaries.typed(data['rows'], int)
    summary.max_class = summaries.typed(data['max_class'], int)
    for mine, kind in ((summary.numbers, summaries.Numbers),
                       (summary.counts, summaries.Counts)):
      theirs = summaries.typed(data[kind.__name__.lower()], dict)
      if set(theirs) != set(mine):
        raise ValueError(f'{kind.__name__} of columns {sorted(theirs)}, '
                         f'not {sorted(mine)}')
      mine.update({name: kind.from_dict(value)
                   for name, value in theirs.items()})
    if (data['labels'] is None) != (summary.labels is None):
      raise ValueError('labels summarised under another head')
    if summary.labels is not None:
      summary.labels = summaries.Numbers.from_dict(data['labels'])
    return summary

  def num_classes(self):
    if not self.class_ids:
      return None
    return 2 if self.head == 'binary' else self.max_class + 1


def _max_class_id(label_name, labels, head):
  """The largest of integer `labels`; DataError on one that is not a class
  id of `head` (0 or 1 for binary)."""
  labels = np.asarray(labels)
  ints = labels.astype(np.int64)
  bad = (ints != labels) | (ints < 0) | (ints > (1 if head == 'binary'
                                                 else np.inf))
  if bad.any():
    expected = '0 or 1' if head == 'binary' else 'a class id 0, 1, ...'
    raise DataError(f"training data, label column '{label_name}': "
                    f'{labels[bad][0]} is not {expected} (--head={head})')
  return int(ints.max(initial=0))
