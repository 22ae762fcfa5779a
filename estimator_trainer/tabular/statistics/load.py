"""The statistics of tabular preprocessing for a run, computed once per
model_dir from the training split and stored in it: every task, every
resume, evaluation and export reads the stored ones, so a model always sees
its inputs encoded as in its training. In a cluster the chief computes them
(its trainers summarise a share of the files each: shares.py); the other
tasks wait for its file.

The pass goes one way: read and summarise the files (scan.py, into a
split_summary.SplitSummary of summaries.py's mergeable summaries), merge
the shares (shares.py), finalize (finalize.py: the Statistics, types.py),
store and read back (storage.py). The Beam pipeline (beam_transforms.py)
runs the same steps on a runner's workers.
"""

import logging
import time

from estimator_trainer import layout
from estimator_trainer.errors import TrainerError
from estimator_trainer.sources import TRAIN
from estimator_trainer.tabular.statistics import finalize
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular.statistics import shares
from estimator_trainer.tabular.statistics import split_summary
from estimator_trainer.tabular.statistics import storage
from estimator_trainer.tabular.statistics import training_files
from estimator_trainer.tabular.statistics.types import differences

_logger = logging.getLogger(__name__)

# How often a task waiting for the chief's statistics looks for them.
_POLL_SECS = 0.2


def _computed(feature_spec, source, head, model_dir, share):
  """The Statistics of `source`'s training split, in one streaming pass
  (shared by `share`'s trainers)."""
  head = split_summary.head_of(feature_spec, head)
  if share and share[1] > 1:
    summary = shares.summarise(model_dir, source, head, share[1])
  else:
    summary = scan.summarise(source, TRAIN, head)
  return finalize.of_summary(feature_spec, summary)


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


def _wait_for(model_dir, files, timeout_secs):
  path = layout.statistics_file(model_dir)
  deadline = time.monotonic() + timeout_secs
  while not storage.usable(model_dir, files):
    remaining = deadline - time.monotonic()
    if remaining <= 0:
      raise TrainerError(
          f'{path}: the chief did not write the tabular statistics in '
          f'{timeout_secs} s (this task waits for them): did it fail?')
    time.sleep(min(_POLL_SECS, remaining))


def load_or_compute(model_dir, feature_spec, source, is_chief=True,
                    timeout_secs=600, head=None, write=True, share=None):
  """The model_dir's Statistics: the stored ones; else the chief (or a task
  alone) computes them from `source`'s training split and stores them
  (unless not `write`: the caller `store`s them once its other checks
  passed), and any other task waits up to `timeout_secs` for the chief's
  file. `share`: (this task's index, the number of trainers) in a cluster,
  whose trainers summarise a share of the files each for the chief
  (shares.py).

  The chief of a resumed run checks the stored ones against the data
  (_check_data); stored ones of other data and no checkpoint are computed
  again (storage.py).
  """
  path = layout.statistics_file(model_dir)
  files = source and training_files.of(source)
  stored_before = storage.usable(model_dir, files)
  if not stored_before:
    if is_chief:
      storage.remove_stale(model_dir, files)
      statistics = _computed(feature_spec, source, head, model_dir, share)
      if write:
        storage.store(model_dir, feature_spec, statistics, files)
      return statistics
    shared = share and share[1] > 1
    head = split_summary.head_of(feature_spec, head)
    if shared:
      shares.store_share(model_dir, source, head, *share)
    _logger.info('Waiting for the chief to write %s', path)
    _wait_for(model_dir, files, timeout_secs)
    if shared:  # Merged by now, or not needed.
      shares.remove_share(model_dir, source, head, *share)
  stored = storage.read(path)
  storage.check_covers(stored, feature_spec, path)
  if stored_before and is_chief:
    _check_data(model_dir, feature_spec, source, head, stored, path, files)
  _logger.info('Tabular statistics read from %s', path)
  return stored
