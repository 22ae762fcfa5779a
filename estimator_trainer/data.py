"""The data layer the engines ask, whichever data they hold: a config's
data as one interface (pipeline.RunData: its spec, serving, statistics,
size, input_fn and what model_dir keeps of it). Images (sources/) are read
here (ImageData), structured data in tabular/dataset.py (TabularData);
both over the shared pipeline (pipeline.py)."""

import tensorflow as tf

from estimator_trainer import deprecation
from estimator_trainer import pipeline
from estimator_trainer import sources
from estimator_trainer.pipeline import ModeKeys
from estimator_trainer.sources import TEST, TRAIN, make_source


def model_images(images):
  """uint8 images as every model takes them, in training and in serving:
  float32 in [0, 1]."""
  return tf.cast(images, tf.float32) / 255.0


def _features(images, labels, mask=None):
  """Batch preprocessing shared by every mode (EVAL: with `mask`)."""
  features = {'image': model_images(images)}
  if mask is not None:
    pipeline.eval_weights(features, mask)
  return features, labels


def _predict_features(images, labels):
  return _features(images, labels)[0]


def crop_flip(seed):
  """Per example: pad 4 pixels, crop a random window of the original size,
  flip left-right at random (the CIFAR standard). Stateless: the same for
  the same `seed` and example index on every rerun and every machine."""
  def augment(index, element):
    image, label = element
    padded = tf.pad(image, [[4, 4], [4, 4], [0, 0]])
    image = tf.image.stateless_random_crop(padded, tf.shape(image),
                                           seed=[seed, 2 * index])
    image = tf.image.stateless_random_flip_left_right(
        image, seed=[seed, 2 * index + 1])
    return image, label
  return augment


class ImageData(pipeline.RunData):
  """An image source (sources/) as the engines read it: its spec, the
  serving of its tf.Examples and its input_fn."""

  def __init__(self, config, source):
    self.source = source
    self._config = config

  def __str__(self):
    return str(self.source)

  @property
  def spec(self):
    return self.source.spec

  @property
  def serving(self):
    return sources.example_format(self._config, self.source.spec)

  def num_examples(self, split):
    return self.source.num_examples(split)

  def make_input_fn(self, config, global_batch_size, seeded=True,
                    train_window=1):
    source = self.source
    # Validates the data before any graph.
    num_test = source.num_examples(TEST)

    def augment(ds, pipeline_id):
      # After the cache: new crops every epoch. Seeded per pipeline.
      return ds.enumerate().map(crop_flip(
          config.seed * 1000 + pipeline_id if seeded else
          tf.random.uniform((), maxval=2**31 - 1, dtype=tf.int64)),
                                num_parallel_calls=tf.data.AUTOTUNE)

    return pipeline.make_input_fn(
        config, global_batch_size, source.dataset, num_test,
        lambda: (tf.zeros(source.spec.image_shape, tf.uint8),
                 tf.constant(0, tf.int64)),
        lambda mode: (_predict_features if mode == ModeKeys.PREDICT
                      else _features),
        seeded, augment if config.augment == 'crop_flip' else None,
        train_window)


def of(config, source=None):
  """The RunData of `source` (default: `config`'s image source): an image
  source wrapped in ImageData, a RunData as it is."""
  source = source or make_source(config)
  return (source if isinstance(source, pipeline.RunData)
          else ImageData(config, source))


def make_input_fn(config, global_batch_size, source=None, seeded=True,
                  train_window=1):
  """Returns `input_fn(mode, input_context=None)` for Estimator.

  `train_window` (deprecated: the estimator engine's loops read batches
  from the iterator) > 1 gives TRAIN windows of that many batches, as
  0.2.0 did.

  TRAIN reads the pipeline's own shard of the train split (shard, cache,
  shuffle, repeat, batch); EVAL reads each test example exactly once
  (padded with weight-0 examples to whole steps); PREDICT the first
  `config.num_predictions` test images.

  Unless `seeded`, each run of a TRAIN pipeline shuffles and augments in
  an order of its own: TensorFlow 2's parameter-server workers all get the
  same input context (the whole split), and would otherwise all read the
  same batches in the same order.
  """
  run_data = of(config, source)
  if train_window != 1:
    deprecation.warn('make_input_fn(train_window=...)',
                     'make_input_fn without it (single batches)', '0.4.0')
    return run_data.make_input_fn(config, global_batch_size, seeded,
                                  train_window=train_window)
  return run_data.make_input_fn(config, global_batch_size, seeded)


def prepare(config, global_batch_size, training, seeded=True):
  """What every engine's job reads: (its data, a pipeline.RunData; the
  training steps; the input_fn). Only training needs the train split's size
  (reading it is not free): None otherwise."""
  if config.structured:
    # Imported here: image runs need not load structured data's modules.
    from estimator_trainer.tabular import dataset  # pylint: disable=g-import-not-at-top
    return dataset.prepare(config, global_batch_size, training, seeded)
  run_data = ImageData(config, make_source(config))
  max_steps = config.resolve_train_steps(
      run_data.num_examples(TRAIN), global_batch_size) if training else None
  return run_data, max_steps, run_data.make_input_fn(
      config, global_batch_size, seeded)
