"""tf.Example records of one image and its label: the keys users' data keep
them under, encoding, decoding and the checks that name the bad file.

TFRecord input (sources.TFRecordSource), the serving signature that takes
tf.Examples (export) and scripts/write_tfrecords.py share one format.
"""

import dataclasses
from typing import Tuple

from google.protobuf import message
import numpy as np
import tensorflow as tf

from estimator_trainer.errors import DataError

_PNG_MAGIC = b'\x89PNG'
# The serving signature that takes serialized tf.Examples of ExampleFormat,
# beside `serving_default`; Estimator names it `<receiver>:<output>`.
EXAMPLES_SIGNATURE = 'examples:serving_default'


@dataclasses.dataclass(frozen=True)
class ExampleFormat:
  """Where tf.Examples keep the image and the label: `image_key` holds raw
  uint8 bytes of `image_shape` or an encoded PNG/JPEG, `label_key` an int64
  in [0, num_classes). TF-Slim and the Model Garden use `image/encoded` and
  `image/class/label`."""

  image_shape: Tuple[int, int, int]
  num_classes: int
  image_key: str = 'image'
  label_key: str = 'label'

  def encode(self, image, label, encoding='raw'):
    """A serialized tf.Example of one uint8 image: raw bytes or 'png'."""
    image = np.asarray(image, np.uint8)
    data = (image.tobytes() if encoding == 'raw' else
            tf.io.encode_png(image).numpy())
    return tf.train.Example(features=tf.train.Features(feature={
        self.image_key: tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[data])),
        self.label_key: tf.train.Feature(int64_list=tf.train.Int64List(
            value=[int(label)])),
    })).SerializeToString()

  def _parse(self, serialized, keys):
    spec = {self.image_key: tf.io.FixedLenFeature([], tf.string),
            self.label_key: tf.io.FixedLenFeature([], tf.int64)}
    return tf.io.parse_example(serialized, {k: spec[k] for k in keys})

  def decode_image(self, data, origin=''):
    """uint8 [H, W, C] of one image's bytes; a wrong shape, channels
    included, fails, naming `origin` (the file)."""
    height, width, channels = self.image_shape
    encoded = tf.logical_or(
        tf.io.is_jpeg(data),
        tf.equal(tf.strings.substr(data, 0, 4), _PNG_MAGIC))

    def decode_encoded():
      # In its own channels: converting RGB to grey (or back) would train
      # on other images than the user's without a word.
      image = tf.io.decode_image(data, expand_animations=False)
      check = tf.debugging.Assert(
          tf.reduce_all(tf.equal(tf.shape(image), self.image_shape)),
          [f'{self.image_key}: image not of shape {list(self.image_shape)} '
           'in', origin, 'shape', tf.shape(image)])
      with tf.control_dependencies([check]):
        return tf.identity(image)

    def decode_raw():
      raw = tf.io.decode_raw(data, tf.uint8)
      check = tf.debugging.Assert(
          tf.equal(tf.size(raw), height * width * channels),
          [f'{self.image_key}: raw image not of {height * width * channels} '
           f'bytes ({list(self.image_shape)}) in', origin, 'bytes',
           tf.size(raw)])
      with tf.control_dependencies([check]):
        return tf.reshape(raw, self.image_shape)

    image = tf.cond(encoded, decode_encoded, decode_raw)
    image.set_shape(self.image_shape)
    return image

  def check_record(self, serialized, origin):
    """Fails with a DataError naming `origin` (which record of which file)
    unless the serialized tf.Example is one of this format: both keys
    there, of their kind, the image of `image_shape` in its own channels,
    the label in range. Says in words, before anything is written, what
    decode() would stop a run with inside a graph."""
    try:
      features = tf.train.Example.FromString(serialized).features.feature
    except message.DecodeError as e:
      raise DataError(f'{origin} is not a tf.Example ({e}): the files must '
                      'be TFRecords of serialized tf.train.Example') from None
    for key, flag, kind in ((self.image_key, 'image_key', 'bytes_list'),
                            (self.label_key, 'label_key', 'int64_list')):
      if key not in features:
        raise DataError(
            f'no feature {key!r} (--{flag}) in {origin}; its features: '
            f'{", ".join(map(repr, sorted(features)))}')
      if (features[key].WhichOneof('kind') != kind or
          len(getattr(features[key], kind).value) != 1):
        raise DataError(f'feature {key!r} in {origin} is not one '
                        f'{kind.split("_")[0]} value')
    data = features[self.image_key].bytes_list.value[0]
    expected = list(self.image_shape)
    if bool(tf.io.is_jpeg(data)) or data.startswith(_PNG_MAGIC):
      shape = tf.io.decode_image(data, expand_animations=False).shape.as_list()
      if shape != expected:
        channels = (f' ({shape[2]} channels, not {expected[2]}: images are '
                    'not converted)' if shape[2] != expected[2] else '')
        raise DataError(
            f'{self.image_key}: image not of shape {expected} in {origin}: '
            f'it is {shape}{channels}; give --image_shape='
            f'{",".join(map(str, shape))} (or fix dataset_spec.json)')
    elif len(data) != np.prod(expected):
      raise DataError(
          f'{self.image_key}: raw image not of {np.prod(expected)} bytes '
          f'({expected}) in {origin}: it has {len(data)}')
    label = features[self.label_key].int64_list.value[0]
    if not 0 <= label < self.num_classes:
      raise DataError(f'{self.label_key}: label outside [0, '
                      f'{self.num_classes}) in {origin}: {label}')

  def check_label(self, label, origin=''):
    """`label` (a scalar or a batch); a label outside [0, num_classes)
    fails, naming `origin`."""
    check = tf.debugging.Assert(
        tf.reduce_all(tf.logical_and(label >= 0, label < self.num_classes)),
        [f'{self.label_key}: label outside [0, {self.num_classes}) in',
         origin, 'label', label])
    with tf.control_dependencies([check]):
      return tf.identity(label)

  def decode_images(self, serialized):
    """uint8 [batch, H, W, C] of a batch of serialized tf.Examples."""
    data = self._parse(serialized, [self.image_key])[self.image_key]
    return tf.map_fn(self.decode_image, data,
                     fn_output_signature=tf.TensorSpec(self.image_shape,
                                                       tf.uint8))

  def decode_labels(self, serialized):
    """int64 [batch] labels of a batch of serialized tf.Examples."""
    return self.check_label(
        self._parse(serialized, [self.label_key])[self.label_key])

  def decode(self, serialized, origin=''):
    """(uint8 image, int64 label) of one serialized tf.Example."""
    features = self._parse(tf.reshape(serialized, [1]),
                           [self.image_key, self.label_key])
    return (self.decode_image(features[self.image_key][0], origin),
            self.check_label(features[self.label_key][0], origin))
