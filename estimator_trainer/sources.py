"""Data sources: TFDS, the original IDX files and TFRecords of tf.Example.

Every source yields the same elements, `(uint8 image [28, 28, 1], int64
label)`, sharded by pipeline on request, so everything after the source
(`data.make_input_fn`: preprocessing, batching) is shared.
"""

import functools
import gzip
import os
import zlib

from absl import logging
import numpy as np
import tensorflow as tf

from estimator_trainer.errors import DataError

IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 10
CLASS_NAMES = {
    'fashion_mnist': ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
                      'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'),
    'mnist': tuple(str(digit) for digit in range(NUM_CLASSES)),
}
TRAIN, TEST = 'train', 'test'
IDX_FILES = {
    TRAIN: ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    TEST: ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
# Where Debian's `dataset-fashion-mnist` package installs the original files.
DEBIAN_IDX_DIRS = {'fashion_mnist': '/usr/share/datasets/fashion-mnist'}
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049
_IMAGES_HEADER, _LABELS_HEADER = 16, 8
_IMAGE_BYTES = int(np.prod(IMAGE_SHAPE))
_DECODE_BATCH = 1024


class IdxSource:
  """The original MNIST-format files (`train-images-idx3-ubyte.gz`, ...)."""

  def __init__(self, name, idx_dir):
    self.name = name
    self.idx_dir = idx_dir

  def __str__(self):
    return f'{self.name} from IDX files in {self.idx_dir}'

  def _paths(self, split):
    return [os.path.join(self.idx_dir, f) for f in IDX_FILES[split]]

  @functools.lru_cache(maxsize=None)
  def num_examples(self, split):
    """Validates the split's two files and returns their example count."""
    images_path, labels_path = self._paths(split)
    num_images = _check_idx(images_path, _IMAGES_MAGIC, (28, 28),
                            _IMAGE_BYTES)
    labels = np.frombuffer(_read_gz(labels_path), np.uint8)
    num_labels = _check_idx(labels_path, _LABELS_MAGIC, (), 1,
                            data=labels.tobytes())
    if num_images != num_labels:
      raise DataError(f'{images_path}: {num_images} images but {labels_path} '
                      f'has {num_labels} labels')
    bad = labels[_LABELS_HEADER:] >= NUM_CLASSES
    if bad.any():
      raise DataError(f'{labels_path}: label {labels[_LABELS_HEADER:][bad][0]} '
                      f'out of range 0..{NUM_CLASSES - 1}')
    return num_images

  def dataset(self, split, num_shards=1, index=0):
    self.num_examples(split)
    images_path, labels_path = self._paths(split)
    # Decoded 1024 records at a time: per record, filling the 60k shuffle
    # buffer (the first training step) took 5.5 s instead of 0.8 s.
    images = tf.data.FixedLengthRecordDataset(
        images_path, _IMAGE_BYTES, header_bytes=_IMAGES_HEADER,
        compression_type='GZIP').batch(_DECODE_BATCH).map(
            lambda r: tf.reshape(tf.io.decode_raw(r, tf.uint8),
                                 [-1, *IMAGE_SHAPE])).unbatch()
    labels = tf.data.FixedLengthRecordDataset(
        labels_path, 1, header_bytes=_LABELS_HEADER,
        compression_type='GZIP').batch(_DECODE_BATCH).map(
            lambda r: tf.cast(tf.io.decode_raw(r, tf.uint8)[:, 0],
                              tf.int64)).unbatch()
    return tf.data.Dataset.zip((images, labels)).shard(num_shards, index)


def _read_gz(path):
  try:
    with gzip.open(path, 'rb') as f:
      return f.read()
  except FileNotFoundError:
    raise DataError(f'{path}: no such file') from None
  except (OSError, EOFError, zlib.error) as e:
    raise DataError(f'{path}: not a complete gzip file ({e})') from None


def _check_idx(path, magic, dims, record_bytes, data=None):
  """Checks an IDX file's header and length; returns its record count."""
  data = _read_gz(path) if data is None else data
  header_len = 8 + 4 * len(dims)
  if len(data) < header_len:
    raise DataError(f'{path}: too short for an IDX header')
  header = np.frombuffer(data[:header_len], '>u4')
  if header[0] != magic:
    raise DataError(f'{path}: magic number {header[0]:#x}, expected '
                    f'{magic:#x}; not an IDX file of this kind')
  count = int(header[1])
  if tuple(header[2:]) != dims:
    raise DataError(f'{path}: records of shape {tuple(header[2:])}, '
                    f'expected {dims}')
  if len(data) != header_len + count * record_bytes:
    raise DataError(f'{path}: header says {count} records but the file '
                    f'holds {(len(data) - header_len) / record_bytes:g}')
  return count


class TfdsSource:
  """A TFDS dataset, downloaded and prepared by TFDS into `data_dir`."""

  def __init__(self, name, data_dir=None):
    import tensorflow_datasets as tfds  # Heavy import, only when used.
    self.name = name
    self._builder = tfds.builder(name, data_dir=data_dir)
    self._prepared = False

  def __str__(self):
    return f'{self.name} from TFDS in {self._builder.data_dir}'

  def _prepare(self):
    if not self._prepared:
      try:
        self._builder.download_and_prepare()
      except Exception as e:  # TFDS raises many types; all mean "no data".
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ''
        raise DataError(
            f'TFDS could not prepare {self.name} in {self._builder.data_dir} '
            f'({type(e).__name__}: {first_line}); offline, pass --idx_dir '
            'with the original IDX .gz files') from None
      self._prepared = True

  @functools.lru_cache(maxsize=None)
  def num_examples(self, split):
    self._prepare()
    if split in self._builder.info.splits:
      return self._builder.info.splits[split].num_examples
    # Datasets without split metadata (e.g. tfds.testing.mock_data): count.
    return int(self.dataset(split).reduce(np.int64(0), lambda n, _: n + 1))

  def dataset(self, split, num_shards=1, index=0):
    self._prepare()
    return self._builder.as_dataset(
        split=split, as_supervised=True, shuffle_files=False).shard(
            num_shards, index)


def encode_example(image, label):
  """The tf.Example of one image: `image` 784 raw uint8 bytes, `label`."""
  return tf.train.Example(features=tf.train.Features(feature={
      'image': tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[np.asarray(image, np.uint8).tobytes()])),
      'label': tf.train.Feature(int64_list=tf.train.Int64List(
          value=[int(label)])),
  })).SerializeToString()


_EXAMPLE_FEATURES = {'image': tf.io.FixedLenFeature([], tf.string),
                     'label': tf.io.FixedLenFeature([], tf.int64)}


def decode_images(serialized):
  """uint8 [batch, 28, 28, 1] from serialized tf.Examples' `image`."""
  raw = tf.io.parse_example(
      serialized, {'image': _EXAMPLE_FEATURES['image']})['image']
  return tf.reshape(tf.io.decode_raw(raw, tf.uint8), [-1, *IMAGE_SHAPE])


def decode_labels(serialized):
  """int64 [batch] from serialized tf.Examples' `label`."""
  return tf.io.parse_example(
      serialized, {'label': _EXAMPLE_FEATURES['label']})['label']


def _decode_example(serialized):
  features = tf.io.parse_single_example(serialized, _EXAMPLE_FEATURES)
  image = tf.reshape(tf.io.decode_raw(features['image'], tf.uint8),
                     IMAGE_SHAPE)
  return image, features['label']


class TFRecordSource:
  """TFRecord files of tf.Example (`image`, `label`), one glob per split."""

  def __init__(self, patterns):
    self.patterns = patterns

  def __str__(self):
    return f'TFRecord files {self.patterns[TRAIN]} / {self.patterns[TEST]}'

  @functools.lru_cache(maxsize=None)
  def files(self, split):
    """The files of comma-separated globs, sorted so every task agrees."""
    files = sorted(f for pattern in self.patterns[split].split(',')
                   for f in tf.io.gfile.glob(pattern.strip()))
    if not files:
      raise DataError(f'no files match {self.patterns[split]!r}')
    return files

  def _records(self, files):
    # TFX's ExampleGen writes gzipped TFRecords (*.gz).
    compression = 'GZIP' if files[0].endswith('.gz') else None
    return tf.data.TFRecordDataset(files, compression_type=compression)

  @functools.lru_cache(maxsize=None)
  def num_examples(self, split):
    try:
      return sum(1 for _ in self._records(self.files(split)))
    except tf.errors.OpError as e:
      raise DataError(f'{self.patterns[split]}: {e.message}') from None

  def dataset(self, split, num_shards=1, index=0):
    files = self.files(split)
    # Whole files per pipeline read less, but only training may have shards
    # of unequal size: evaluation pads every shard to the same step count.
    if split == TRAIN and len(files) >= num_shards:
      ds = self._records(files[index::num_shards])
    else:
      ds = self._records(files).shard(num_shards, index)
    return ds.map(_decode_example, num_parallel_calls=tf.data.AUTOTUNE)


def resolve_idx_dir(config):
  """`--idx_dir`, or Debian's copy of the dataset when installed."""
  if config.idx_dir or config.data_source == 'tfds':
    return config.idx_dir
  debian_dir = DEBIAN_IDX_DIRS.get(config.dataset)
  if debian_dir and os.path.isdir(debian_dir):
    return debian_dir
  return None


def make_source(config):
  """The source `config` asks for; IDX files when available under `auto`."""
  idx_dir = resolve_idx_dir(config)
  if config.train_files:
    source = TFRecordSource({TRAIN: config.train_files,
                             TEST: config.eval_files})
  elif idx_dir and config.data_source != 'tfds':
    source = IdxSource(config.dataset, idx_dir)
  else:
    source = TfdsSource(config.dataset, config.data_dir)
  logging.info('Data: %s', source)
  return source
