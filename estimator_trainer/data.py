"""The Estimator `input_fn` over any source (sources/): each pipeline
reads its own shard, each replica its share of the global batch."""

import logging
import math

import tensorflow as tf

from estimator_trainer import deprecation
from estimator_trainer import models
from estimator_trainer import sources
from estimator_trainer.sources import TEST, TRAIN, make_source

_logger = logging.getLogger(__name__)


class ModeKeys:
  """tf.estimator.ModeKeys' values, which Estimator passes to input_fn; the
  TF2 engines pass the same (tf.estimator is gone from TensorFlow 2.16)."""
  TRAIN = 'train'
  EVAL = 'eval'
  PREDICT = 'infer'


def model_images(images):
  """uint8 images as every model takes them, in training and in serving:
  float32 in [0, 1]."""
  return tf.cast(images, tf.float32) / 255.0


def eval_weights(features, mask, weights=None):
  """Adds to EVAL `features` their weights (`weights`, or 1, times `mask`:
  with_eval_padding's 0 for padding) and which rows are padding."""
  features[models.WEIGHT] = mask if weights is None else mask * weights
  features[models.PADDING] = tf.equal(mask, 0.0)
  return features


def _features(images, labels, mask=None):
  """Batch preprocessing shared by every mode (EVAL: with `mask`)."""
  features = {'image': model_images(images)}
  if mask is not None:
    eval_weights(features, mask)
  return features, labels


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


def eval_padded_size(num_examples, num_pipelines, local_replicas, batch_size):
  """Examples each eval pipeline yields once padded.

  Every pipeline must run the same number of steps, and each step needs one
  batch per local replica, or the last examples would be dropped. Padding
  examples carry weight 0, so metrics count every real example exactly once.
  """
  per_pipeline = math.ceil(num_examples / num_pipelines)
  steps = math.ceil(per_pipeline / (batch_size * local_replicas))
  return steps * local_replicas * batch_size


def _pipeline_options():
  options = tf.data.Options()
  # tf.data's autotuning thread sleeps on a doubling period (10 ms, 20 ms,
  # ...) and destroying the iterator waits for it: training and evaluation
  # ended with an idle 10-40 s. Seen here with TF 2.15; the pipeline is
  # light enough not to need it.
  options.autotune.enabled = False
  return options


PIPELINE_OPTIONS = _pipeline_options()


def pipeline_layout(mode, input_context, global_batch_size):
  """(pipelines, this pipeline's index, batch per replica, replicas this
  pipeline feeds) of an input_fn call in `mode` with `input_context`
  (None: one pipeline, one replica)."""
  if input_context is None:
    return 1, 0, global_batch_size, 1
  num_pipelines = input_context.num_input_pipelines
  # Evaluation may run on another strategy than training: any split of the
  # batch will do there, as long as it does not fail.
  batch_size = (
      input_context.get_per_replica_batch_size(global_batch_size)
      if mode == ModeKeys.TRAIN else
      max(1, global_batch_size // input_context.num_replicas_in_sync))
  return (num_pipelines, input_context.input_pipeline_id, batch_size,
          input_context.num_replicas_in_sync // num_pipelines)


def shuffled_repeat(ds, config, seeded, cache=True):
  """A TRAIN pipeline's examples: cached in memory (unless not `cache`),
  shuffled (seeded unless not `seeded`: see make_input_fn), repeated. The
  order is the same either way."""
  if cache:
    ds = ds.cache()
  if config.shuffle_buffer:
    ds = ds.shuffle(config.shuffle_buffer,
                    seed=config.seed if seeded else None)
  return ds.repeat()


def with_eval_padding(ds, padding, padded_size):
  """`ds`'s elements (tuples, or single tensors) each with weight 1.0, then
  `padding` (an element's tensors) with weight 0.0, to `padded_size`
  (eval_padded_size) elements."""
  padding = tf.data.Dataset.from_tensors((*padding, 0.0)).repeat()
  return ds.map(lambda *element: (*element, 1.0)).concatenate(
      padding).take(padded_size)


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
  if train_window != 1:
    deprecation.warn('make_input_fn(train_window=...)',
                     'make_input_fn without it (single batches)', '0.4.0')
  source = source or make_source(config)
  if hasattr(source, 'make_input_fn'):  # Structured data (tabular/).
    return source.make_input_fn(config, global_batch_size, seeded)
  num_test = source.num_examples(TEST)  # Validates the data before any graph.

  def input_fn(mode, input_context=None):
    num_pipelines, pipeline_id, batch_size, local_replicas = pipeline_layout(
        mode, input_context, global_batch_size)

    if mode == ModeKeys.PREDICT:
      ds = source.dataset(TEST).take(config.num_predictions)
      return ds.batch(batch_size).map(
          lambda x, y: _features(x, y)[0]).prefetch(tf.data.AUTOTUNE)

    split = TRAIN if mode == ModeKeys.TRAIN else TEST
    if num_pipelines > 1:
      _logger.info('Input pipeline %d of %d reads its shard of %s',
                   pipeline_id, num_pipelines, split)
    ds = source.dataset(split, num_pipelines, pipeline_id)

    if mode == ModeKeys.TRAIN:
      ds = shuffled_repeat(ds, config, seeded)
      if config.augment == 'crop_flip':
        # After the cache: new crops every epoch. Seeded per pipeline.
        ds = ds.enumerate().map(crop_flip(
            config.seed * 1000 + pipeline_id if seeded else
            tf.random.uniform((), maxval=2**31 - 1, dtype=tf.int64)),
                                num_parallel_calls=tf.data.AUTOTUNE)
      ds = ds.batch(batch_size, drop_remainder=True).map(
          _features, num_parallel_calls=tf.data.AUTOTUNE)
      if train_window > 1:
        ds = ds.batch(train_window, drop_remainder=True)
    else:
      ds = with_eval_padding(
          ds, (tf.zeros(source.spec.image_shape, tf.uint8),
               tf.constant(0, tf.int64)),
          eval_padded_size(num_test, num_pipelines, local_replicas,
                           batch_size))
      ds = ds.batch(batch_size).map(
          _features, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(PIPELINE_OPTIONS)

  return input_fn


def example_format(config, source):
  """How serving reads tf.Examples of `source`'s data: an
  examples.ExampleFormat of images, or structured data's serving object
  (tabular/dataset.py)."""
  return getattr(source, 'serving', None) or sources.example_format(
      config, source.spec)


def persist(model_dir, source):
  """Stores in model_dir what a training chief's data needs kept there
  (structured data's statistics; images: nothing)."""
  if hasattr(source, 'persist'):
    source.persist(model_dir)


def prepare(config, global_batch_size, training, seeded=True):
  """What every engine's job reads: (source, training steps, input_fn). Only
  training needs the train split's size (reading it is not free): None
  otherwise."""
  if config.structured:
    from estimator_trainer.tabular import dataset  # pylint: disable=g-import-not-at-top
    return dataset.prepare(config, global_batch_size, training, seeded)
  source = make_source(config)
  max_steps = config.resolve_train_steps(
      source.num_examples(TRAIN), global_batch_size) if training else None
  return source, max_steps, make_input_fn(config, global_batch_size, source,
                                          seeded)
