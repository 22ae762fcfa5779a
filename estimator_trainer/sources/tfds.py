"""TFDS image-classification datasets, downloaded and prepared by TFDS."""

import contextlib
import functools

import numpy as np
import tensorflow as tf

from estimator_trainer.errors import DataError, UsageError, first_line
from estimator_trainer.sources.files import memoized
from estimator_trainer.sources.spec import TEST, TRAIN, DatasetSpec

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

  @memoized
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
