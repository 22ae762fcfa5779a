"""The statistics pass shared by a cluster's trainers: trainer i of n
summarises every n-th training file from the i-th and stores its summary in
model_dir; the chief summarises its own share, then takes each other
share's stored summary, or summarises the share itself where none is
stored yet (a worker late, down or done already), and merges them. The
chief waits for no one: at worst the pass takes what one task's would, at
best 1/n of it.

A share's file name holds a digest of the spec, the head, the files with
their sizes and the summaries' format: a summary of other data, or one an
earlier version stored, is never taken.
"""

import hashlib
import logging
import os
import pickle

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.sources import TRAIN
from estimator_trainer.tabular import scan
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import summaries

_logger = logging.getLogger(__name__)
_DIR = 'summaries'


def _path(model_dir, source, head, index, count):
  files = source.files(TRAIN)
  key = repr((spec_lib.to_json(source.feature_spec), head, files,
              source.file_sizes(TRAIN), summaries.FORMAT))
  digest = hashlib.sha256(key.encode()).hexdigest()[:16]
  return os.path.join(layout.preprocessing_dir(model_dir), _DIR,
                      f'{digest}-{index}-of-{count}.pickle')


def _share(source, head, index, count):
  return scan.summarise(source, TRAIN, head,
                        source.files(TRAIN)[index::count])


def store_share(model_dir, source, head, index, count):
  """Trainer `index` of `count` (not the chief) stores its share's
  summary."""
  path = _path(model_dir, source, head, index, count)
  tf.io.gfile.makedirs(os.path.dirname(path))
  outputs.write_atomic(path, pickle.dumps(_share(source, head, index,
                                                 count)))


def remove_share(model_dir, source, head, index, count):
  """Trainer `index` deletes its share once the chief has written the
  statistics: merged into them, or not needed."""
  path = _path(model_dir, source, head, index, count)
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)


def summarise(model_dir, source, head, count):
  """The chief's SplitSummary of the whole training split: its share (0)
  and the others' stored or computed here."""
  summary = _share(source, head, 0, count)
  taken = 0
  for index in range(1, count):
    path = _path(model_dir, source, head, index, count)
    if tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path, 'rb') as f:
        summary.merge(pickle.loads(f.read()))
      taken += 1
    else:
      summary.merge(_share(source, head, index, count))
  _logger.info('Tabular statistics: %d of %d shares summarised by other '
               'tasks', taken, count - 1)
  return summary
