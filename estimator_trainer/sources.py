"""Data sources: TFDS, the original IDX files and TFRecords of tf.Example,
each with its DatasetSpec.

Every source yields `(uint8 image [H, W, C], int64 label)` elements of its
spec's shape, sharded by pipeline on request, so everything after the source
(`data.make_input_fn`: preprocessing, batching) is shared.
"""

import concurrent.futures
import contextlib
import dataclasses
import functools
import gzip
import json
import logging
import os
from typing import Tuple
import zlib

import numpy as np
import tensorflow as tf

from estimator_trainer import examples
from estimator_trainer.errors import DataError, UsageError, first_line

_logger = logging.getLogger(__name__)

# The two roles of a split: what training reads, what evaluation and
# prediction read.
TRAIN, TEST = 'train', 'test'
KNOWN_CLASS_NAMES = {
    'fashion_mnist': ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
                      'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'),
    'mnist': tuple(str(digit) for digit in range(10)),
}
IDX_FILES = {
    TRAIN: ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    TEST: ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
# Where Debian's `dataset-fashion-mnist` package installs the original files.
DEBIAN_IDX_DIRS = {'fashion_mnist': '/usr/share/datasets/fashion-mnist'}
# Beside TFRecord files: their image shape, classes and class names.
SPEC_FILE = 'dataset_spec.json'
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049
_DECODE_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """What everything after the source needs to know about the data: the
  model's input and output sizes, parsing, serving, eval images, HParams."""

  name: str
  image_shape: Tuple[int, int, int]
  num_classes: int
  class_names: Tuple[str, ...] = ()

  def __post_init__(self):
    object.__setattr__(self, 'image_shape',
                       tuple(int(d) for d in self.image_shape))
    if not self.class_names:
      object.__setattr__(self, 'class_names', KNOWN_CLASS_NAMES.get(
          self.name, tuple(str(i) for i in range(self.num_classes))))
    object.__setattr__(self, 'class_names', tuple(self.class_names))
    if len(self.image_shape) != 3 or min(self.image_shape) < 1:
      raise UsageError(f'{self.name}: image shape must be [height, width, '
                       f'channels], got {list(self.image_shape)}')
    if self.num_classes < 2:
      raise UsageError(f'{self.name}: needs >= 2 classes, got '
                       f'{self.num_classes}')
    if len(self.class_names) != self.num_classes:
      raise UsageError(f'{self.name}: {len(self.class_names)} class names for '
                       f'{self.num_classes} classes')

  # Images are classified: no head to choose (heads.ImageClassifierHead).
  head = None

  @property
  def model_input(self):
    """What a builder is given first (models.py): the image shape."""
    return self.image_shape

  def record(self):
    """What model_dir's record of the run keeps of the data."""
    return {'dataset': self.name, 'image_shape': list(self.image_shape),
            'num_classes': self.num_classes}

  def to_json(self):
    return json.dumps({'name': self.name, 'image_shape': self.image_shape,
                       'num_classes': self.num_classes,
                       'class_names': self.class_names}, indent=1)

  @classmethod
  def read(cls, path):
    """The spec in a SPEC_FILE."""
    try:
      with tf.io.gfile.GFile(path) as f:
        values = json.load(f)
      return cls(values['name'], values['image_shape'],
                 values['num_classes'], values.get('class_names', ()))
    except (OSError, tf.errors.OpError, ValueError, KeyError,
            TypeError) as e:
      raise DataError(f'{path}: not a dataset spec ({type(e).__name__}: '
                      f'{e})') from None


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
    _, dims = _idx_header(_read_gz(path), path, _IMAGES_MAGIC, 2)
    num_classes = len(KNOWN_CLASS_NAMES.get(self.name, ())) or 1 + max(
        int(self._labels(split).max(initial=0)) for split in (TRAIN, TEST)
        if os.path.exists(self._paths(split)[1]))
    return DatasetSpec(self.name, (*dims, 1), num_classes)

  @functools.lru_cache(maxsize=None)
  def _labels(self, split):
    path = self._paths(split)[1]
    data = _read_gz(path)
    count, _ = _idx_header(data, path, _LABELS_MAGIC, 0)
    _check_length(path, data, 8, count, 1)
    return np.frombuffer(data, np.uint8)[8:]

  @functools.lru_cache(maxsize=None)
  def num_examples(self, split):
    """Validates the split's two files and returns their example count."""
    images_path, labels_path = self._paths(split)
    data = _read_gz(images_path)
    num_images, dims = _idx_header(data, images_path, _IMAGES_MAGIC, 2)
    if (*dims, 1) != self.spec.image_shape:
      raise DataError(f'{images_path}: images of shape {list(dims)}, but '
                      f'the test images are {list(self.spec.image_shape[:2])}')
    _check_length(images_path, data, 16, num_images, int(np.prod(dims)))
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
        images_path, int(np.prod(shape)), header_bytes=16,
        compression_type='GZIP').batch(_DECODE_BATCH).map(
            lambda r: tf.reshape(tf.io.decode_raw(r, tf.uint8),
                                 [-1, *shape])).unbatch()
    labels = tf.data.FixedLengthRecordDataset(
        labels_path, 1, header_bytes=8,
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


class TfdsSource:
  """A TFDS image-classification dataset (an `image` and a ClassLabel
  `label` feature), downloaded and prepared by TFDS into `data_dir`.

  `splits` maps TRAIN and TEST to TFDS splits (slicing syntax allowed:
  'train[:90%]'); `image_size` (height, width) resizes every image, for
  datasets whose images vary in size.
  """

  def __init__(self, name, data_dir=None, splits=None, image_size=None):
    import tensorflow_datasets as tfds  # Heavy import, only when used.
    self.name = name
    self._splits = splits or {TRAIN: 'train', TEST: 'test'}
    self._image_size = image_size
    try:
      self._builder = tfds.builder(name, data_dir=data_dir)
    except Exception as e:  # pylint: disable=broad-except
      raise UsageError(f'--dataset {name}: not a TFDS dataset '
                       f'({type(e).__name__}: {first_line(e)})') from None
    self._prepared = False

  def __str__(self):
    return f'{self.name} from TFDS in {self._builder.data_dir}'

  @functools.cached_property
  def spec(self):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    features = self._builder.info.features
    names = set(features.keys())
    if not ({'image', 'label'} <= names and
            isinstance(features['image'], tfds.features.Image) and
            isinstance(features['label'], tfds.features.ClassLabel)):
      raise UsageError(
          f'--dataset {self.name}: needs an `image` and a ClassLabel `label` '
          f'feature; it has {", ".join(sorted(names))}')
    height, width, channels = features['image'].shape
    if self._image_size:
      height, width = self._image_size
    if height is None or width is None:
      raise UsageError(f'--dataset {self.name}: its images vary in size; '
                       'give --image_size=HEIGHT,WIDTH')
    label = features['label']
    return DatasetSpec(self.name, (height, width, channels),
                       label.num_classes, tuple(label.names))

  def _prepare(self):
    if not self._prepared:
      try:
        with _bounded_download_retries():
          self._builder.download_and_prepare()
      except Exception as e:  # TFDS raises many types; all mean "no data".
        raise DataError(
            f'TFDS could not prepare {self.name} in {self._builder.data_dir} '
            f'({type(e).__name__}: {first_line(e)}); offline, pass --idx_dir '
            'with the original IDX .gz files') from None
      self._prepared = True

  @functools.lru_cache(maxsize=None)
  def num_examples(self, split):
    self._prepare()
    try:
      return self._builder.info.splits[self._splits[split]].num_examples
    except (KeyError, ValueError):
      # No split metadata (e.g. tfds.testing.mock_data): count.
      return int(self.dataset(split).reduce(np.int64(0), lambda n, _: n + 1))

  def dataset(self, split, num_shards=1, index=0):
    self._prepare()
    spec = self.spec
    try:
      ds = self._builder.as_dataset(split=self._splits[split],
                                    as_supervised=True, shuffle_files=False)
    except Exception as e:  # pylint: disable=broad-except
      raise UsageError(f'--dataset {self.name}: no split '
                       f'{self._splits[split]!r} ({first_line(e)})') from None
    ds = ds.shard(num_shards, index)
    if self._image_size:
      ds = ds.map(lambda x, y: (_resize(x, spec.image_shape), y),
                  num_parallel_calls=tf.data.AUTOTUNE)
    return ds


# TFDS's downloader retries each URL 10 times (urllib3, backoff 0.2 s
# doubling; connection errors too): offline, 204 s of sleeps before its
# error. 5 retries, 6 s of them, still ride out a flaky server.
_DOWNLOAD_RETRIES = 5


@contextlib.contextmanager
def _bounded_download_retries():
  """TFDS's downloads retry at most _DOWNLOAD_RETRIES times meanwhile."""
  from tensorflow_datasets.core.download import downloader  # pylint: disable=g-import-not-at-top
  saved = downloader.MAX_RETRIES  # Read at each download (TFDS 4.9).
  downloader.MAX_RETRIES = min(saved, _DOWNLOAD_RETRIES)
  try:
    yield
  finally:
    downloader.MAX_RETRIES = saved


def _resize(image, shape):
  """uint8 `image` resized to `shape`'s height and width, still uint8."""
  resized = tf.image.resize(image, shape[:2])
  return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)


class TFRecordSource:
  """TFRecord files of tf.Example, one glob per split (comma-separated
  globs allowed; gzipped files end in .gz, as TFX's ExampleGen writes)."""

  def __init__(self, patterns, example_format, spec):
    self.patterns = patterns
    self.format = example_format
    self.spec = spec

  def __str__(self):
    return f'TFRecord files {self.patterns[TRAIN]} / {self.patterns[TEST]}'

  @functools.lru_cache(maxsize=None)
  def files(self, split):
    return glob_files(self.patterns[split])

  @staticmethod
  def _records(files):
    """(serialized record, its file name), file by file in order."""
    return tf.data.Dataset.from_tensor_slices(files).flat_map(
        lambda f: tf.data.TFRecordDataset(
            f, compression_type=compression(files)).map(lambda r: (r, f)))

  @functools.lru_cache(maxsize=None)
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
    spec = DatasetSpec(spec.name, config.image_shape or spec.image_shape,
                       config.num_classes or spec.num_classes)
  return spec


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


def make_source(config):
  """The source `config` asks for; IDX files when available under `auto`."""
  idx_dir = resolve_idx_dir(config)
  if config.train_files:
    patterns = {TRAIN: config.train_files, TEST: config.eval_files}
    spec = tfrecord_spec(config, glob_files(patterns[TRAIN]))
    source = TFRecordSource(patterns, example_format(config, spec), spec)
  elif idx_dir and config.data_source != 'tfds':
    source = IdxSource(config.dataset, idx_dir)
  else:
    source = TfdsSource(config.dataset, config.data_dir,
                        {TRAIN: config.train_split, TEST: config.eval_split},
                        config.image_size)
  _logger.info('Data: %s (%s)', source, source.spec)
  return source
