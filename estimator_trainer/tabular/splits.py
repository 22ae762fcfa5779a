"""Which of the training files' records each split takes when parts are held
out of them: a record's hash bucket (of HOLDOUT_BUCKETS) decides, so that a
record's split is its content's, whatever the files' order, sharding or
task (as TFX's ExampleGen splits by hash).

The evaluation hold-out (--eval_fraction, without --eval_files) takes the
first buckets, the validation part (--validation_fraction of the records
left for training) the next ones, training the rest: three disjoint ranges,
the same in every run and on every worker. A cross-validation fold
(--cv_fold=K,N) is the K-th of N equal ranges of the buckets left for
training: it is the evaluation split, the others train.
"""

import tensorflow as tf

from estimator_trainer.sources import TEST, TRAIN

HOLDOUT_BUCKETS = 1000


def bucket(records):
  """The hash bucket (int64) of each of the tf.string `records`."""
  return tf.strings.to_hash_bucket_fast(records, HOLDOUT_BUCKETS)


class Buckets:
  """The bucket range [low, high) of TRAIN and TEST (None: all of that
  split's own files). `validation`: TEST is the validation part (of the
  training files), not the evaluation split. `fold` (K, N): TEST is fold K
  (1-based) of N of the training records, TRAIN the rest of them
  (`excluded`: the range TRAIN leaves out)."""

  def __init__(self, eval_fraction=None, validation_fraction=None,
               validation=False, fold=None):
    held_out = (max(1, round(eval_fraction * HOLDOUT_BUCKETS))
                if eval_fraction else 0)
    validating = (max(1, round(validation_fraction *
                               (HOLDOUT_BUCKETS - held_out)))
                  if validation_fraction else 0)
    self.eval_share = held_out / HOLDOUT_BUCKETS
    self.validation_share = validating / HOLDOUT_BUCKETS
    start = held_out + validating
    self.ranges = {
        TRAIN: (start, HOLDOUT_BUCKETS) if start else None,
        TEST: ((held_out, start) if validation else
               (0, held_out) if held_out else None)}
    self.fold, self.excluded = fold, None
    if fold:
      number, folds = fold
      low, high = (start + round(i * (HOLDOUT_BUCKETS - start) / folds)
                   for i in (number - 1, number))
      self.ranges = {TRAIN: (start, HOLDOUT_BUCKETS), TEST: (low, high)}
      self.excluded = (low, high)

  @property
  def test_from_training(self):
    """Whether TEST's records are some of the training files'."""
    return self.ranges[TEST] is not None

  def kept(self, buckets, split):
    """Which of `buckets` (a tensor or a numpy array) belong to `split`;
    None when all do."""
    if self.ranges[split] is None:
      return None
    low, high = self.ranges[split]
    kept = (buckets >= low) & (buckets < high)
    if split == TRAIN and self.excluded:
      kept &= (buckets < self.excluded[0]) | (buckets >= self.excluded[1])
    return kept

  def describe(self):
    """The parts held out, in words ('' when none)."""
    parts = [f'{share:.1%} of the records held out for {what}'
             for share, what in ((self.eval_share, 'evaluation'),
                                 (self.validation_share, 'validation'))
             if share]
    if self.fold:  # The evaluation hold-out is left out, unread.
      parts = [f'{self.eval_share:.1%} of the records left out'] * bool(
          self.eval_share) + ['cross-validation fold {} of {} of the rest '
                              'evaluated'.format(*self.fold)]
    return f' ({", ".join(parts)})' if parts else ''
