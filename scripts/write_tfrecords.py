#!/usr/bin/env python3
"""Writes a dataset's train and test splits as sharded TFRecord files.

    python scripts/write_tfrecords.py --dataset=fashion_mnist \\
        --output_dir=/tmp/fmnist_tfrecords --num_shards=8

Files: <output_dir>/{train,test}-00000-of-00008.tfrecord, each record a
tf.Example with `image` (784 raw uint8 bytes) and `label` (int64), which
`--train_files`/`--eval_files` read. Reads the data as the trainer does
(--idx_dir, --data_dir, --data_source).
"""

import os
import sys

from absl import app
from absl import flags

from estimator_trainer import sources
from estimator_trainer.config import TrainConfig

FLAGS = flags.FLAGS


def _define_flags():
  """Only when run as a script: tests import write_split beside run.py's."""
  flags.DEFINE_string('dataset', 'fashion_mnist', 'fashion_mnist or mnist.')
  flags.DEFINE_string('data_source', 'auto', 'tfds, idx or auto.')
  flags.DEFINE_string('data_dir', None, 'TFDS data_dir.')
  flags.DEFINE_string('idx_dir', None, 'Directory of the IDX .gz files.')
  flags.DEFINE_string('output_dir', None, 'Where the TFRecord files go.')
  flags.DEFINE_integer('num_shards', 8, 'Files per split.')


def write_split(source, split, output_dir, num_shards):
  """Writes one split round-robin into `num_shards` files; returns paths."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  paths = [os.path.join(output_dir,
                        f'{split}-{i:05d}-of-{num_shards:05d}.tfrecord')
           for i in range(num_shards)]
  # Write to temporary names, rename when complete: no half-written shard.
  writers = [tf.io.TFRecordWriter(p + '.tmp') for p in paths]
  for i, (image, label) in enumerate(source.dataset(split)):
    writers[i % num_shards].write(sources.encode_example(image.numpy(), label))
  for writer, path in zip(writers, paths):
    writer.close()
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
  return paths


def main(argv):
  del argv
  if not FLAGS.output_dir or FLAGS.num_shards < 1:
    sys.exit('error: --output_dir and --num_shards >= 1 are required')
  config = TrainConfig(model_dir=FLAGS.output_dir, dataset=FLAGS.dataset,
                       data_source=FLAGS.data_source, data_dir=FLAGS.data_dir,
                       idx_dir=FLAGS.idx_dir)
  source = sources.make_source(config)
  os.makedirs(FLAGS.output_dir, exist_ok=True)
  for split in (sources.TRAIN, sources.TEST):
    paths = write_split(source, split, FLAGS.output_dir, FLAGS.num_shards)
    print(f'{split}: {source.num_examples(split)} examples in {len(paths)} '
          f'files {paths[0]} ...')


if __name__ == '__main__':
  _define_flags()
  app.run(main)
