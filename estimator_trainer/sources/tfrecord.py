"""TFRecord files of tf.Example and their DatasetSpec."""

import os

import numpy as np
import tensorflow as tf

from estimator_trainer import examples
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.sources.files import (compression, eagerly,
                                             glob_files, memoized,
                                             whole_files)
from estimator_trainer.sources.spec import SPEC_FILE, TEST, TRAIN, DatasetSpec

_DECODE_BATCH = 1024  # Records counted per batch.


class TFRecordSource:
  """TFRecord files of tf.Example, one glob per split (comma-separated
  globs allowed; gzipped files end in .gz, as TFX's ExampleGen writes)."""

  def __init__(self, patterns, example_format, spec):
    self.patterns = patterns
    self.format = example_format
    self.spec = spec

  def __str__(self):
    return f'TFRecord files {self.patterns[TRAIN]} / {self.patterns[TEST]}'

  @memoized
  def files(self, split):
    return glob_files(self.patterns[split])

  @staticmethod
  def _records(files):
    """(serialized record, its file name), file by file in order."""
    return tf.data.Dataset.from_tensor_slices(files).flat_map(
        lambda f: tf.data.TFRecordDataset(
            f, compression_type=compression(files)).map(lambda r: (r, f)))

  @memoized
  def file_sizes(self, split):
    """Records per file of the split, in files' order. Checks the split's
    first record first (every engine reads the size of the splits it reads
    before it writes anything)."""
    return eagerly(self._count, split)

  def _count(self, split):
    files = self.files(split)
    try:
      for record, path in self._records(files).take(1):
        self.format.check_record(
            record.numpy(), f'the first record of {path.numpy().decode()}')
      # Counted by batch: by record took 30 times longer (9 s for 200,000).
      sizes = tf.data.Dataset.from_tensor_slices(files).map(
          lambda f: tf.data.TFRecordDataset(
              f, compression_type=compression(files)).batch(
                  _DECODE_BATCH).reduce(
                      np.int64(0),
                      lambda n, batch: n + tf.size(batch, tf.int64)))
      return tuple(int(n) for n in sizes.as_numpy_iterator())
    except tf.errors.OpError as e:
      raise DataError(f'{self.patterns[split]}: {e.message}') from None

  def num_examples(self, split):
    return sum(self.file_sizes(split))

  def dataset(self, split, num_shards=1, index=0):
    files = self.files(split)
    if whole_files(self.file_sizes(split), split, num_shards):
      # Each pipeline reads less.
      ds = self._records(files[index::num_shards])
    else:
      ds = self._records(files).shard(num_shards, index)
    return ds.map(self.format.decode, num_parallel_calls=tf.data.AUTOTUNE)


def example_format(config, spec):
  """The tf.Example format of TFRecord input and of the serving signature
  that takes tf.Examples: --image_key and --label_key, the spec's shape."""
  return examples.ExampleFormat(spec.image_shape, spec.num_classes,
                       config.image_key, config.label_key)


def tfrecord_spec(config, train_files):
  """The DatasetSpec of TFRecords: --image_shape and --num_classes, else the
  SPEC_FILE beside the first train file (scripts/write_tfrecords.py writes
  it), the flags overriding what they give."""
  spec_path = os.path.join(os.path.dirname(train_files[0]), SPEC_FILE)
  if config.image_shape and config.num_classes:
    return DatasetSpec('tfrecord', config.image_shape, config.num_classes)
  if not tf.io.gfile.exists(spec_path):
    raise UsageError(f'TFRecords need {SPEC_FILE} beside them ({spec_path}) '
                     'or --image_shape=H,W,C and --num_classes')
  spec = DatasetSpec.read(spec_path)
  if config.image_shape or config.num_classes:
    num_classes = config.num_classes or spec.num_classes
    # The file's class names name the classes unless the count changed.
    spec = DatasetSpec(spec.name, config.image_shape or spec.image_shape,
                       num_classes, spec.class_names
                       if num_classes == spec.num_classes else ())
  return spec
