"""Helpers the sources share: file globs, TFRecord compression, how a
split's files shard, eager work from inside Estimator's graph, and a
method's results kept on its source."""

import concurrent.futures
import functools

import tensorflow as tf

from estimator_trainer.errors import DataError
from estimator_trainer.sources.spec import TRAIN

def memoized(method):
  """`method`'s result for each of its arguments, kept on the instance: a
  source reads a file's sizes or flags once, and they go when the source
  does. functools.lru_cache on a method keeps every instance it was called
  on, with its results, for the process's life (a pipeline that makes a
  source per run would hold them all)."""
  @functools.wraps(method)
  def cached(self, *args):
    results = vars(self).setdefault(f'_memoized_{method.__name__}', {})
    if args not in results:
      results[args] = method(self, *args)
    return results[args]
  return cached


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
  """The files of comma-separated globs, sorted so every task agrees; a
  file two globs match once (else its records would count, and train,
  twice)."""
  files = sorted({f for pattern in patterns.split(',')
                  for f in tf.io.gfile.glob(pattern.strip())})
  if not files:
    raise DataError(f'no files match {patterns!r}')
  return files
