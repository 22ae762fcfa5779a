"""Store and read back (the pass's last steps): the Statistics in model_dir
(preprocessing/statistics.json, beside the feature spec and the record of
the training files they are of), as JSON: data that runs no code when
read. Stored ones of other training files, with no checkpoint trained on
them, are stale: removed and computed again."""

import logging

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.statistics import training_files
from estimator_trainer.tabular.statistics.types import Statistics

_logger = logging.getLogger(__name__)


def read(path):
  try:
    with tf.io.gfile.GFile(path) as f:
      return Statistics.from_json(f.read())
  except (ValueError, KeyError, TypeError) as e:
    raise DataError(f'{path}: not tabular statistics ({type(e).__name__}: '
                    f'{e})') from None


def check_covers(statistics, feature_spec, path):
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


def store(model_dir, feature_spec, statistics, files=None):
  """Stores `statistics` in model_dir unless it holds some already, with
  the record of the training `files` they are of (training_files.of)."""
  path = layout.statistics_file(model_dir)
  if not tf.io.gfile.exists(path):
    _write(model_dir, feature_spec, statistics, files)
    _logger.info('Tabular statistics of %d training examples written to %s',
                 statistics.num_examples, path)
