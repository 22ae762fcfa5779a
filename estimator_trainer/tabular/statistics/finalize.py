"""Finalize (the pass's fourth step): a training split's SplitSummary into
the Statistics a model's preprocessing is built from, per column its mean
and variance (float_normalized), bin boundaries (float_discretized) or
vocabulary (categorical), the value that fills a missing number (the mean
of the present ones, every float kind); the number of classes of an
integer label and a regression label's scale."""

import logging
import math

from estimator_trainer.errors import DataError
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.statistics import split_summary
from estimator_trainer.tabular.statistics import summaries
from estimator_trainer.tabular.statistics.split_summary import (
    INTEGER_MISSING, STRING_MISSING)
from estimator_trainer.tabular.statistics.types import (ColumnStatistics,
                                                        Statistics)

_logger = logging.getLogger(__name__)


def _column_statistics(column, summary, max_vocabulary, min_frequency):
  """A column's statistics from its summary. A float kind's are over the
  present values: a missing one takes their mean (as scikit-learn's
  SimpleImputer), not a 0.0 that would pull the mean and stand for a real
  value; with the column's own `default` nothing is missing. A vocabulary
  is by frequency, then value, without the missing marker (unless a string
  column has a default of its own; -1 is also IntegerLookup's
  out-of-vocabulary token)."""
  if column.kind in spec_lib.FLOAT_KINDS:
    # A column of a `source` (given boundaries) takes its source's fill.
    numbers = summary.numbers[column.source or column.name]
    mean, variance, boundaries = numbers.result(
        column.num_bins if column.kind == 'float_discretized' and
        column.boundaries is None else None)
    if column.kind == 'float_normalized':
      return ColumnStatistics(mean=mean, variance=variance, fill=mean)
    if column.kind == 'float_discretized':
      # Given boundaries (the spec's, e.g. a bucketized_column's) as given.
      if column.boundaries is not None:
        return ColumnStatistics(boundaries=column.boundaries, fill=mean)
      if len(boundaries) + 1 < column.num_bins:
        _logger.warning(
            "Column '%s' has %d bins, not the %d asked: values that many "
            'rows share repeat quantiles (each of them a bin of its own)',
            column.name, len(boundaries) + 1, column.num_bins)
      return ColumnStatistics(boundaries=boundaries, fill=mean)
    return ColumnStatistics(fill=mean)
  if column.dtype == 'string':
    leave_out = {STRING_MISSING} if column.default is None else set()
  else:
    leave_out = {INTEGER_MISSING}
  if column.vocabulary:  # Given (the spec's): as given, order and all.
    return ColumnStatistics(vocabulary=column.vocabulary)
  counts = summary.counts[column.name]
  if counts.pruned:
    _logger.warning(
        "Column '%s' has more than %d distinct values: its counts are at "
        'most %d under the true ones (never over), so every value counted '
        'more than %d times is kept and the vocabulary is of the most '
        'frequent within that error (a string_hashed or integer_hashed kind '
        'fits such a column)', column.name, summaries.MAX_TRACKED,
        counts.error, counts.error)
  min_frequency = column.min_frequency or min_frequency
  vocabulary = counts.vocabulary(column.max_vocabulary or max_vocabulary,
                                 min_frequency, leave_out)
  if not vocabulary and counts.vocabulary(leave_out=leave_out):
    raise DataError(f"column '{column.name}': no value is counted "
                    f'min_frequency ({min_frequency}) times or more in the '
                    'training split')
  return ColumnStatistics(vocabulary=vocabulary)


def of_summary(feature_spec, summary, max_vocabulary=None, min_frequency=1):
  """The Statistics of a split_summary.SplitSummary of the training split;
  vocabularies of the values counted `min_frequency` times or more, the
  `max_vocabulary` most frequent (tf.Transform's frequency_threshold and
  top_k)."""
  stats = {column.name: _column_statistics(column, summary, max_vocabulary,
                                           min_frequency)
           for column in feature_spec.columns
           if column.kind in spec_lib.FLOAT_KINDS + spec_lib.CATEGORICAL_KINDS}
  label_scale = None
  if summary.labels is not None:
    mean, variance, _ = summary.labels.result()
    # A constant label's deviation as 1: the outputs then move in its units.
    label_scale = (mean, math.sqrt(variance) or 1.0)
  return Statistics(stats, summary.rows, summary.num_classes(), label_scale)


def compute(feature_spec, columns, head=None, max_vocabulary=None):
  """The Statistics of `columns` (column name -> numpy array of the whole
  training split, as TabularSource.columns returns them). `head`: the run's
  (default: the spec's, else multiclass); `max_vocabulary` caps each
  vocabulary to its most frequent values."""
  summary = split_summary.SplitSummary(feature_spec, head)
  summary.add_columns(columns)
  return of_summary(feature_spec, summary, max_vocabulary)
