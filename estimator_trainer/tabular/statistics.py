"""The statistics of tabular preprocessing: per column its mean and variance
(float_normalized), bin boundaries (float_discretized) or vocabulary
(categorical), the value that fills a missing number (the mean of the
present ones, every float kind), and the number of classes of an integer
label.

Computed once per model_dir from the training split and stored in it: every
task, every resume, evaluation and export reads the stored ones, so a model
always sees its inputs encoded as in its training. In a cluster the chief
computes them; the other tasks wait for its file. Their types, and what
differs between two: statistics_types.py.
"""

import logging
import math
import time

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.errors import DataError, TrainerError, UsageError
from estimator_trainer.sources import TRAIN
from estimator_trainer.tabular import scan
from estimator_trainer.tabular import shared_pass
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import split_summary
from estimator_trainer.tabular import summaries
from estimator_trainer.tabular import training_files
from estimator_trainer.tabular.split_summary import (INTEGER_MISSING,
                                                     STRING_MISSING)
# The types, from their module: callers read the statistics as a whole here.
from estimator_trainer.tabular.statistics_types import (
    ColumnStatistics, Statistics, differences)

_logger = logging.getLogger(__name__)

# How often a task waiting for the chief's statistics looks for them.
_POLL_SECS = 0.2


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


def _computed(feature_spec, source, head, model_dir, share):
  """The Statistics of `source`'s training split, in one streaming pass
  (shared by `share`'s trainers)."""
  head = split_summary.head_of(feature_spec, head)
  if share and share[1] > 1:
    summary = shared_pass.summarise(model_dir, source, head, share[1])
  else:
    summary = scan.summarise(source, TRAIN, head)
  return of_summary(feature_spec, summary)


def read(path):
  try:
    with tf.io.gfile.GFile(path) as f:
      return Statistics.from_json(f.read())
  except (ValueError, KeyError, TypeError) as e:
    raise DataError(f'{path}: not tabular statistics ({type(e).__name__}: '
                    f'{e})') from None


def _check_covers(statistics, feature_spec, path):
  """The stored statistics have what the feature spec's columns need."""
  needs = {'float_normalized': 'mean', 'float_discretized': 'boundaries',
           'integer_categorical': 'vocabulary',
           'string_categorical': 'vocabulary'}
  for column in feature_spec.columns:
    key = needs.get(column.kind)
    stats = statistics.columns.get(column.name)
    if key and (stats is None or getattr(stats, key) is None):
      raise UsageError(
          f"{path}: no {key} of column '{column.name}' ({column.kind} in the "
          f'feature spec): this model_dir was trained on another feature '
          'spec; use a new --model_dir')


def _write(model_dir, feature_spec, statistics, files):
  # The statistics last: the file other tasks wait for.
  if files:
    training_files.write(model_dir, files)
  outputs.write_atomic(layout.feature_spec_file(model_dir),
                       spec_lib.to_json(feature_spec))
  outputs.write_atomic(layout.statistics_file(model_dir), statistics.to_json())


def _check_data(model_dir, feature_spec, source, head, stored, path, files):
  """A resumed chief: on the training `files` the statistics were computed
  from, nothing to do (no second pass over data of any size); on other
  ones, the pass warns, in one line, when the statistics differ (the run
  keeps the stored ones: the checkpoints' model was trained on them), and
  else records the files."""
  if training_files.stored(model_dir) == files:
    return
  changed = differences(stored, _computed(feature_spec, source, head,
                                          model_dir, None))
  if changed:
    _logger.warning(
        '%s: the training data differ from these stored statistics (%s); '
        'this run keeps the stored ones, which its model was trained on',
        path, '; '.join(changed[:3] + (['...'] if len(changed) > 3 else [])))
  else:
    training_files.write(model_dir, files)


def _stale(model_dir, files):
  """Whether model_dir's statistics are of other training files than
  `files` (training_files.of; None: not known) and it has no checkpoint:
  no model was trained on them (its run failed before its first step, say,
  and the data were fixed since), so they are computed again. Statistics
  stored before their record are not."""
  stored = training_files.stored(model_dir)
  return bool(files and stored and stored != files and
              not layout.has_checkpoint(model_dir))


def usable(model_dir, files):
  """Whether model_dir holds statistics to use with the training `files`
  (training_files.of): some, not _stale. The record is read first: the
  chief removes stale ones before it writes another record, so that no
  task takes stale ones for new."""
  return not _stale(model_dir, files) and tf.io.gfile.exists(
      layout.statistics_file(model_dir))


def remove_stale(model_dir, files):
  """Removes _stale statistics, saying so in a line."""
  path = layout.statistics_file(model_dir)
  if _stale(model_dir, files) and tf.io.gfile.exists(path):
    _logger.warning('%s: of other training files than these, and no '
                    'checkpoint yet: removed, computed again', path)
    tf.io.gfile.remove(path)


def _wait_for(model_dir, files, timeout_secs):
  path = layout.statistics_file(model_dir)
  deadline = time.monotonic() + timeout_secs
  while not usable(model_dir, files):
    remaining = deadline - time.monotonic()
    if remaining <= 0:
      raise TrainerError(
          f'{path}: the chief did not write the tabular statistics in '
          f'{timeout_secs} s (this task waits for them): did it fail?')
    time.sleep(min(_POLL_SECS, remaining))


def store(model_dir, feature_spec, statistics, files=None):
  """Stores `statistics` in model_dir unless it holds some already, with
  the record of the training `files` they are of (training_files.of)."""
  path = layout.statistics_file(model_dir)
  if not tf.io.gfile.exists(path):
    _write(model_dir, feature_spec, statistics, files)
    _logger.info('Tabular statistics of %d training examples written to %s',
                 statistics.num_examples, path)


def load_or_compute(model_dir, feature_spec, source, is_chief=True,
                    timeout_secs=600, head=None, write=True, share=None):
  """The model_dir's Statistics: the stored ones; else the chief (or a task
  alone) computes them from `source`'s training split and stores them
  (unless not `write`: the caller `store`s them once its other checks
  passed), and any other task waits up to `timeout_secs` for the chief's
  file. `share`: (this task's index, the number of trainers) in a cluster,
  whose trainers summarise a share of the files each for the chief
  (shared_pass.py).

  The chief of a resumed run checks the stored ones against the data
  (_check_data); stored ones of other data and no checkpoint are computed
  again (_stale).
  """
  path = layout.statistics_file(model_dir)
  files = source and training_files.of(source)
  stored_before = usable(model_dir, files)
  if not stored_before:
    if is_chief:
      remove_stale(model_dir, files)
      statistics = _computed(feature_spec, source, head, model_dir, share)
      if write:
        store(model_dir, feature_spec, statistics, files)
      return statistics
    shared = share and share[1] > 1
    head = split_summary.head_of(feature_spec, head)
    if shared:
      shared_pass.store_share(model_dir, source, head, *share)
    _logger.info('Waiting for the chief to write %s', path)
    _wait_for(model_dir, files, timeout_secs)
    if shared:  # Merged by now, or not needed.
      shared_pass.remove_share(model_dir, source, head, *share)
  stored = read(path)
  _check_covers(stored, feature_spec, path)
  if stored_before and is_chief:
    _check_data(model_dir, feature_spec, source, head, stored, path, files)
  _logger.info('Tabular statistics read from %s', path)
  return stored
