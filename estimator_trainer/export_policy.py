"""Which SavedModels `--export` writes and keeps, the same in every engine:
`final` after the last evaluation, `latest` after every evaluation, `best`
after one at least as accurate as the best export written so far; of
`latest` and `best`, the --exports_to_keep newest are kept.

Each export holds the evaluation it follows (RECORD, written into it before
it is renamed into place), so that a restarted run or evaluator compares
with the best export that was written: not with nothing (TF 2.15's
BestExporter exports its first evaluation in a process, whatever came
before), nor with an evaluation whose export failed (a checkpoint that
training deleted first). Its global_step ties it to its checkpoint: a
rerun (stopped after the export, before metrics.json) keeps the export of
that step, and writes no second one of the same weights.

Both engine families use it (no tf.estimator here).
"""

import json
import logging
import os
import time
import uuid

import tensorflow as tf

from estimator_trainer import early_stopping
from estimator_trainer import layout

EXTRA_DIR = 'assets.extra'  # A SavedModel's directory for other files.
RECORD_FILE = 'evaluation.json'
RECORD = os.path.join(EXTRA_DIR, RECORD_FILE)
# An export's name until it is whole and renamed (Estimator's naming).
TEMPORARY_PREFIX = 'temp-'

_logger = logging.getLogger(__name__)


def record(eval_result):
  """RECORD's text for an evaluation: its numbers (numpy's as Python's),
  not its image summaries (bytes)."""
  return json.dumps({name: value for name, value in eval_result.items()
                     if not isinstance(value, bytes)}, sort_keys=True,
                    default=lambda number: number.item()) + '\n'


def _exports(base_dir):
  """The names of the exports in `base_dir`, oldest first."""
  if not tf.io.gfile.isdir(base_dir):
    return []
  names = (name.strip('/') for name in tf.io.gfile.listdir(base_dir))
  return sorted((name for name in names if name.isdigit()), key=int)


def _recorded(export_dir):
  """The evaluation RECORD holds in an export, {} in one without."""
  path = os.path.join(export_dir, RECORD)
  if not tf.io.gfile.exists(path):
    return {}
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def _export_of_step(base_dir, step):
  """The path of base_dir's export of the checkpoint at `step`; None
  without one."""
  for name in reversed(_exports(base_dir)):
    path = os.path.join(base_dir, name)
    if _recorded(path).get('global_step') == step:
      return path
  return None


def best_exported_score(model_dir):
  """The eval score (early_stopping.score) of model_dir's best `best`
  export, None without one.

  That is the newest: each was at least as accurate as those before. One
  written before exports held their RECORD: the best of model_dir's
  evaluations.
  """
  base_dir = layout.export_dir(model_dir, 'best')
  exports = _exports(base_dir)
  if not exports:
    return None
  recorded = _recorded(os.path.join(base_dir, exports[-1]))
  if recorded:
    return early_stopping.score(recorded)
  return max(early_stopping.eval_accuracies(
      layout.eval_dir(model_dir)).values(), default=None)


def owner(config):
  """What names an exporting task's temporary directories: its task in a
  cluster (a restarted task removes what it left), else `local`."""
  cluster = config.cluster
  return f'{cluster.task_type}{cluster.task_index}' if cluster else 'local'


def write_whole(write_fn, base_dir, owner_name):
  """Writes an export with `write_fn(temporary)` into a new directory of
  its own beside base_dir's exports (`write_fn` returns the SavedModel's
  path in it), then renames it into base_dir under a fresh name: another
  task exporting the same checkpoint in the same second (a chief that does
  not know of an evaluator) writes elsewhere and takes another name.
  Returns the export's path; removes the temporary directory."""
  temporary = os.path.join(
      base_dir, f'{TEMPORARY_PREFIX}{owner_name}-{uuid.uuid4().hex}')
  tf.io.gfile.makedirs(temporary)
  try:
    path = _publish(write_fn(temporary), base_dir)
  finally:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.rmtree(temporary)
  _logger.info('Exported a SavedModel to %s', path)
  return path


def _publish(written, base_dir):
  """Renames the whole export `written` to base_dir/<timestamp>: now's, or
  the next one free when another exporter took it (between the check and
  the rename too: the rename then fails, the name being taken)."""
  timestamp = int(time.time())
  while True:
    path = os.path.join(base_dir, str(timestamp))
    if not tf.io.gfile.exists(path):
      try:
        tf.io.gfile.rename(written, path)
        return path
      except tf.errors.OpError:
        if not tf.io.gfile.exists(path):
          raise
    timestamp += 1


class ExportPolicy:
  """`--export` of one task, whose SavedModels go to `base_dir`
  (model_dir's export/<kind>/ unless given: a TF2 non-chief worker writes
  into its scratch dir)."""

  def __init__(self, config, base_dir=None):
    self.kind = config.export
    self.base_dir = base_dir or layout.export_dir(config.model_dir, self.kind)
    self._owner = owner(config)
    self._keep = config.exports_to_keep
    # Read once, before this task's first evaluation: every worker of a
    # collective strategy reads the chief's exports alike, and decides alike.
    self._best = (best_exported_score(config.model_dir)
                  if self.kind == 'best' else None)

  def wants(self, eval_result, final):
    """Whether to export after `eval_result` (`final`: of the last step)."""
    if self.kind == 'best':
      # >=: of two models equally accurate, the newer (trained longer).
      return self._best is None or early_stopping.score(
          eval_result) >= self._best
    return self.kind == 'latest' or final

  def write(self, write_fn, eval_result):
    """Writes an export after `eval_result` with `write_fn(record_text,
    temporary)`, which writes the SavedModel with RECORD into directory
    `temporary` and returns its path (write_whole renames it into
    base_dir); keeps the newest; returns the path.

    An export counts once written: one that fails (its error propagates)
    neither raises the bar of `best` nor leaves its temporary directory.
    One of the same checkpoint step, already written, is kept instead.
    """
    text = record(eval_result)
    try:
      path = _export_of_step(self.base_dir, eval_result['global_step'])
      if path:
        _logger.info('Kept %s, the export of step %d', path,
                     eval_result['global_step'])
      else:
        path = write_whole(lambda temporary: write_fn(text, temporary),
                           self.base_dir, self._owner)
    finally:
      self._remove_temporaries()
    if self.kind == 'best':
      self._best = early_stopping.score(eval_result)
    if self.kind != 'final':
      for old in _exports(self.base_dir)[:-self._keep]:
        tf.io.gfile.rmtree(os.path.join(self.base_dir, old))
    return path

  def _remove_temporaries(self):
    """Removes what this task's killed exports left; not another task's
    temporary directory, which may be an export being written."""
    if not tf.io.gfile.isdir(self.base_dir):
      return
    for name in tf.io.gfile.listdir(self.base_dir):
      if name.startswith(f'{TEMPORARY_PREFIX}{self._owner}-'):
        tf.io.gfile.rmtree(os.path.join(self.base_dir, name.strip('/')))
