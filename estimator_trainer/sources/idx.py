"""The original MNIST-format IDX files, and where Debian installs them."""

import functools
import gzip
import os
import zlib

import numpy as np
import tensorflow as tf

from estimator_trainer.errors import DataError
from estimator_trainer.sources.files import memoized
from estimator_trainer.sources.spec import (KNOWN_CLASS_NAMES, TEST, TRAIN,
                                            DatasetSpec)

IDX_FILES = {
    TRAIN: ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    TEST: ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
# Where Debian's `dataset-fashion-mnist` package installs the original files.
DEBIAN_IDX_DIRS = {'fashion_mnist': '/usr/share/datasets/fashion-mnist'}
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049
# Magic, count and one size per dimension, 4 bytes each: the spec reads
# only the images' header; a split's files are read and checked whole
# (num_examples).
_IMAGES_HEADER_BYTES, _LABELS_HEADER_BYTES = 16, 8
_DECODE_BATCH = 1024  # Records decoded per batch.


class IdxSource:
  """The original MNIST-format files (`train-images-idx3-ubyte.gz`, ...), of
  any image size their headers declare."""

  def __init__(self, name, idx_dir):
    self.name = name
    self.idx_dir = idx_dir

  def __str__(self):
    return f'{self.name} from IDX files in {self.idx_dir}'

  def _paths(self, split):
    return [os.path.join(self.idx_dir, f) for f in IDX_FILES[split]]

  @functools.cached_property
  def spec(self):
    """Shape from the test images' header (every mode reads the test split);
    10 classes for MNIST and Fashion-MNIST, else 1 + the largest label."""
    path = self._paths(TEST)[0]
    _, dims = _idx_header(_read_gz(path, _IMAGES_HEADER_BYTES), path,
                          _IMAGES_MAGIC, 2)
    num_classes = len(KNOWN_CLASS_NAMES.get(self.name, ())) or 1 + max(
        int(self._labels(split).max(initial=0)) for split in (TRAIN, TEST)
        if os.path.exists(self._paths(split)[1]))
    return DatasetSpec(self.name, (*dims, 1), num_classes)

  @memoized
  def _labels(self, split):
    path = self._paths(split)[1]
    data = _read_gz(path)
    count, _ = _idx_header(data, path, _LABELS_MAGIC, 0)
    _check_length(path, data, _LABELS_HEADER_BYTES, count, 1)
    return np.frombuffer(data, np.uint8)[_LABELS_HEADER_BYTES:]

  @memoized
  def num_examples(self, split):
    """Validates the split's two files and returns their example count."""
    images_path, labels_path = self._paths(split)
    data = _read_gz(images_path)
    num_images, dims = _idx_header(data, images_path, _IMAGES_MAGIC, 2)
    if (*dims, 1) != self.spec.image_shape:
      raise DataError(f'{images_path}: images of shape {list(dims)}, but '
                      f'the test images are {list(self.spec.image_shape[:2])}')
    _check_length(images_path, data, _IMAGES_HEADER_BYTES, num_images,
                  int(np.prod(dims)))
    labels = self._labels(split)
    if num_images != len(labels):
      raise DataError(f'{images_path}: {num_images} images but {labels_path} '
                      f'has {len(labels)} labels')
    bad = labels >= self.spec.num_classes
    if bad.any():
      raise DataError(f'{labels_path}: label {labels[bad][0]} out of range '
                      f'0..{self.spec.num_classes - 1}')
    return num_images

  def dataset(self, split, num_shards=1, index=0):
    self.num_examples(split)
    images_path, labels_path = self._paths(split)
    shape = self.spec.image_shape
    # Decoded 1024 records at a time: per record, filling the 60k shuffle
    # buffer (the first training step) took 5.5 s instead of 0.8 s.
    images = tf.data.FixedLengthRecordDataset(
        images_path, int(np.prod(shape)), header_bytes=_IMAGES_HEADER_BYTES,
        compression_type='GZIP').batch(_DECODE_BATCH).map(
            lambda r: tf.reshape(tf.io.decode_raw(r, tf.uint8),
                                 [-1, *shape])).unbatch()
    labels = tf.data.FixedLengthRecordDataset(
        labels_path, 1, header_bytes=_LABELS_HEADER_BYTES,
        compression_type='GZIP').batch(_DECODE_BATCH).map(
            lambda r: tf.cast(tf.io.decode_raw(r, tf.uint8)[:, 0],
                              tf.int64)).unbatch()
    return tf.data.Dataset.zip((images, labels)).shard(num_shards, index)


def _read_gz(path, size=-1):
  """The first `size` bytes of a gzipped file, or all of them."""
  try:
    with gzip.open(path, 'rb') as f:
      return f.read(size)
  except FileNotFoundError:
    raise DataError(f'{path}: no such file') from None
  except (OSError, EOFError, zlib.error) as e:
    raise DataError(f'{path}: not a complete gzip file ({e})') from None


def _idx_header(data, path, magic, num_dims):
  """(record count, record dims) of an IDX file's header."""
  header_len = 8 + 4 * num_dims
  if len(data) < header_len:
    raise DataError(f'{path}: too short for an IDX header')
  header = np.frombuffer(data[:header_len], '>u4')
  if header[0] != magic:
    raise DataError(f'{path}: magic number {header[0]:#x}, expected '
                    f'{magic:#x}; not an IDX file of this kind')
  return int(header[1]), tuple(int(d) for d in header[2:])


def _check_length(path, data, header_len, count, record_bytes):
  if len(data) != header_len + count * record_bytes:
    raise DataError(f'{path}: header says {count} records but the file '
                    f'holds {(len(data) - header_len) / record_bytes:g}')


def resolve_idx_dir(config):
  """`--idx_dir`, or Debian's copy of the dataset when installed (for the
  default splits only: IDX files have no slicing)."""
  if config.idx_dir or config.data_source == 'tfds':
    return config.idx_dir
  if (config.train_split, config.eval_split) != (TRAIN, TEST):
    return None
  debian_dir = DEBIAN_IDX_DIRS.get(config.dataset)
  if debian_dir and os.path.isdir(debian_dir):
    return debian_dir
  return None
