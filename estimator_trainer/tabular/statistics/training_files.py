"""The record of the training files a model_dir's statistics come from
(preprocessing/training_files.json), read without reading the data: a
resumed chief on the same files makes no second statistics pass."""

import json

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.sources import TRAIN


def of(source):
  """The split of TabularSource `source` (its files' patterns, a held-out
  fraction, whether unlabeled records are skipped) and each training
  file's path, size and modification time, as JSON reads them back."""
  # Absolute: a run started in another directory (the record's paths are
  # absolute: run_record.of) has the same files.
  files = [[layout.absolute(path), stat.length, stat.mtime_nsec]
           for path, stat in ((path, tf.io.gfile.stat(path))
                              for path in source.files(TRAIN))]
  return {'split': source.describe(absolute=True),
          'skip_unlabeled': source.skip_unlabeled,
          'files': files}


def write(model_dir, record):
  outputs.write_atomic(layout.training_files_file(model_dir),
                       json.dumps(record, indent=1) + '\n')


def stored(model_dir):
  """The stored record; None in statistics stored before it."""
  path = layout.training_files_file(model_dir)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.loads(f.read())
