#!/usr/bin/env python3
"""Writes a dataset's train and test splits as sharded TFRecord files.

    python scripts/write_tfrecords.py --dataset=fashion_mnist \\
        --output_dir=/tmp/fmnist_tfrecords --num_shards=8

Files: <output_dir>/{train,test}-00000-of-00008.tfrecord, each record a
tf.Example with the image under --image_key (raw uint8 bytes, or PNG with
--encoding=png) and the int64 label under --label_key, and
<output_dir>/dataset_spec.json (image shape, classes, class names), which
`--train_files`/`--eval_files` read. Reads the data as the trainer does
(--dataset, --idx_dir, --data_dir, --data_source).
"""

from estimator_trainer import console

if __name__ == '__main__':
  # A command of the docs: TensorFlow's start-up noise hidden, before the
  # imports below load it.
  console.quiet_tensorflow(verbose=False)

# pylint: disable=g-import-not-at-top
import os

from absl import app
from absl import flags

from estimator_trainer import errors
from estimator_trainer import outputs
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError

FLAGS = flags.FLAGS


def _define_flags():
  """Only when run as a script: tests import the functions."""
  flags.DEFINE_string('dataset', 'fashion_mnist', 'TFDS name.')
  flags.DEFINE_string('data_source', 'auto', 'tfds, idx or auto.')
  flags.DEFINE_string('data_dir', None, 'TFDS data_dir.')
  flags.DEFINE_string('idx_dir', None, 'Directory of the IDX .gz files.')
  flags.DEFINE_string('output_dir', None, 'Where the TFRecord files go.')
  flags.DEFINE_integer('num_shards', 8, 'Files per split.')
  flags.DEFINE_string('image_key', 'image', 'tf.Example key of the image.')
  flags.DEFINE_string('label_key', 'label', 'tf.Example key of the label.')
  flags.DEFINE_enum('encoding', 'raw', ['raw', 'png'],
                    'Images as raw uint8 bytes or PNG.')


def write_split(source, split, output_dir, num_shards, example_format,
                encoding='raw'):
  """Writes one split round-robin into `num_shards` files; returns paths."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  paths = [os.path.join(output_dir,
                        f'{split}-{i:05d}-of-{num_shards:05d}.tfrecord')
           for i in range(num_shards)]
  # Write to temporary names, rename when complete: no half-written shard.
  writers = [tf.io.TFRecordWriter(p + '.tmp') for p in paths]
  for i, (image, label) in enumerate(source.dataset(split)):
    writers[i % num_shards].write(
        example_format.encode(image.numpy(), label, encoding))
  for writer, path in zip(writers, paths):
    writer.close()
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
  return paths


def write(source, output_dir, num_shards, example_format, encoding='raw'):
  """Both splits and the dataset_spec.json beside them; {split: paths}."""
  os.makedirs(output_dir, exist_ok=True)
  paths = {split: write_split(source, split, output_dir, num_shards,
                              example_format, encoding)
           for split in (sources.TRAIN, sources.TEST)}
  outputs.write_atomic(os.path.join(output_dir, sources.SPEC_FILE),
                       source.spec.to_json())
  return paths


def main(argv):
  try:
    if len(argv) > 1:
      raise errors.UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
    if not FLAGS.output_dir or FLAGS.num_shards < 1:
      raise errors.UsageError('--output_dir and --num_shards >= 1 are '
                              'required')
    config = TrainConfig(model_dir=FLAGS.output_dir, dataset=FLAGS.dataset,
                         data_source=FLAGS.data_source,
                         data_dir=FLAGS.data_dir, idx_dir=FLAGS.idx_dir,
                         image_key=FLAGS.image_key,
                         label_key=FLAGS.label_key)
    source = sources.make_source(config)
    paths = write(source, FLAGS.output_dir, FLAGS.num_shards,
                  sources.example_format(config, source.spec), FLAGS.encoding)
  except TrainerError as e:
    errors.fail(e.exit_code, str(e))
  for split, files in paths.items():
    print(f'{split}: {source.num_examples(split)} examples in {len(files)} '
          f'files {files[0]} ...')


if __name__ == '__main__':
  _define_flags()
  app.run(main, flags_parser=errors.parse_flags)
