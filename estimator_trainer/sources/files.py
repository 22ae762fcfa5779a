"""Helpers the sources share: file globs, TFRecord compression, how a
split's files shard, and eager work from inside Estimator's graph."""

import concurrent.futures

import tensorflow as tf

from estimator_trainer.errors import DataError
from estimator_trainer.sources.spec import TRAIN

def compression(files):
  """TFRecordDataset's compression_type: gzipped files end in .gz."""
  return 'GZIP' if files[0].endswith('.gz') else None


def eagerly(function, *args):
  """`function(*args)` in a thread of its own: eager even when an input_fn
  asks inside Estimator's graph (the default graph is per thread)."""
  with concurrent.futures.ThreadPoolExecutor(1) as thread:
    return thread.submit(function, *args).result()


def whole_files(sizes, split, num_shards):
  """Whether pipeline i's files `files[i::num_shards]` (of `sizes` records
  each) give each training pipeline the same number of records, within one
  (as sharding by record does). Otherwise a pipeline of fewer records would
  start its next epoch while the others are still in theirs: some examples
  would train twice in an epoch, others not at all. Evaluation pads every
  shard to the same step count: it shards by record."""
  if split != TRAIN or num_shards == 1:
    return False
  totals = [sum(sizes[i::num_shards]) for i in range(num_shards)]
  return max(totals) - min(totals) <= 1


def glob_files(patterns):
  """The files of comma-separated globs, sorted so every task agrees."""
  files = sorted(f for pattern in patterns.split(',')
                 for f in tf.io.gfile.glob(pattern.strip()))
  if not files:
    raise DataError(f'no files match {patterns!r}')
  return files
