"""The statistics pass shared by a cluster's trainers: trainer i of n
summarises every n-th training file from the i-th and stores its summary in
model_dir; the chief summarises its own share, then takes each other
share's stored summary, or summarises the share itself where none is
stored yet (a worker late, down or done already), and merges them. The
chief waits for no one: at worst the pass takes what one task's would, at
best 1/n of it.

A share is JSON (SplitSummary.to_dict), data that runs no code when read:
anyone who can write to model_dir can put a file there. Its name holds a
digest of the spec, the head, the split, its files with their sizes and
modification times (training_files.of) and the summaries' format: a summary
of other data (a file rewritten, even with as many rows), or one an earlier
version stored, is never taken.
"""

import hashlib
import json
import logging
import os

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.errors import DataError, first_line
from estimator_trainer.sources import TRAIN
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular.statistics import split_summary
from estimator_trainer.tabular.statistics import summaries
from estimator_trainer.tabular.statistics import training_files

_logger = logging.getLogger(__name__)
_DIR = 'summaries'


def _paths(model_dir, source, head, count):
  """The `count` shares' paths."""
  key = json.dumps([spec_lib.to_json(source.feature_spec), head,
                    training_files.of(source), summaries.FORMAT])
  digest = hashlib.sha256(key.encode()).hexdigest()[:16]
  return [os.path.join(layout.preprocessing_dir(model_dir), _DIR,
                       f'{digest}-{index}-of-{count}.json')
          for index in range(count)]


def _share(source, head, index, count):
  return scan.summarise(source, TRAIN, head,
                        source.files(TRAIN)[index::count])


def store_share(model_dir, source, head, index, count):
  """Trainer `index` of `count` (not the chief) stores its share's
  summary."""
  path = _paths(model_dir, source, head, count)[index]
  tf.io.gfile.makedirs(os.path.dirname(path))
  share = _share(source, head, index, count).to_dict()
  outputs.write_atomic(path, json.dumps({'format': summaries.FORMAT,
                                         'summary': share}) + '\n')


def _read(path, feature_spec, head):
  """The SplitSummary stored at `path`; DataError naming it on anything but
  a share of this format, spec and head."""
  try:
    with tf.io.gfile.GFile(path, 'rb') as f:
      stored = json.loads(f.read())
    if stored['format'] != summaries.FORMAT:
      raise ValueError(f"format {stored['format']!r}, not "
                       f'{summaries.FORMAT}')
    return split_summary.SplitSummary.from_dict(feature_spec, head,
                                                stored['summary'])
  except (ValueError, TypeError, LookupError) as e:
    raise DataError(
        f'{path}: not a statistics share of this version '
        f'({type(e).__name__}: {first_line(e)}); delete it') from None


def remove_share(model_dir, source, head, index, count):
  """Trainer `index` deletes its share once the chief has written the
  statistics: merged into them, or not needed."""
  path = _paths(model_dir, source, head, count)[index]
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)


def summarise(model_dir, source, head, count):
  """The chief's SplitSummary of the whole training split: its share (0)
  and the others' stored or computed here."""
  summary = _share(source, head, 0, count)
  taken = 0
  paths = _paths(model_dir, source, head, count)
  for index in range(1, count):
    path = paths[index]
    if tf.io.gfile.exists(path):
      summary.merge(_read(path, source.feature_spec, head))
      taken += 1
    else:
      summary.merge(_share(source, head, index, count))
  _logger.info('Tabular statistics: %d of %d shares summarised by other '
               'tasks', taken, count - 1)
  return summary
