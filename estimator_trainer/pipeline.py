"""The input pipeline every source shares, below all of them: shard by
pipeline, split the global batch by replica, shuffle and repeat TRAIN, pad
EVAL to whole steps. A source brings only its examples and how a batch of
them becomes `(features, labels)` (data.py: images; tabular/input.py:
structured data)."""

import logging
import math

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer.sources import TEST, TRAIN

_logger = logging.getLogger(__name__)


class ModeKeys:
  """tf.estimator.ModeKeys' values, which Estimator passes to input_fn; the
  TF2 engines pass the same (tf.estimator is gone from TensorFlow 2.16)."""
  TRAIN = 'train'
  EVAL = 'eval'
  PREDICT = 'infer'


class RunData:
  """What an engine's job reads of its data, images (data.ImageData) or
  structured data (tabular/dataset.py's TabularData) alike: `spec` (name,
  head, classes, model input), `serving` (how serving reads tf.Examples),
  `statistics` (structured data's; None for images), `num_examples(split)`,
  `make_input_fn(config, global_batch_size, seeded)` and `persist`."""

  statistics = None

  def persist(self, model_dir):
    """Stores in `model_dir` what a training chief's data needs kept there:
    nothing, unless the data says otherwise."""


def eval_weights(features, mask, weights=None, keys=models.FeatureKeys()):
  """Adds to EVAL `features` their weights (`weights`, or 1, times `mask`:
  with_eval_padding's 0 for padding) and which rows are padding, under
  `keys` (models.FeatureKeys.of the model's inputs; images': the default)."""
  features[keys.weight] = mask if weights is None else mask * weights
  features[keys.padding] = tf.equal(mask, 0.0)
  return features


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


def _shuffled(ds, buffer_size, seed):
  """`ds` shuffled in the order of the seed pair (`seed`, `seed`) in every
  engine: the pair canned Estimators' RunConfig(tf_random_seed=seed) gives
  a graph's tf.data shuffle, as Keras's set_random_seed(seed) does eagerly.

  tf.data takes the pair's first seed from the graph's (eagerly: the
  process's) global seed: Estimator's graph has --seed, the TF2 engines'
  eager context none (87654321 then), so one --seed shuffled in two orders,
  and the engines' runs of one table differed (issue 72, item 4). The seed
  is set on the graph that builds the shuffle alone, never the process's:
  eagerly, a function's graph."""
  def build(ds):
    graph = tf.compat.v1.get_default_graph()
    previous, graph.seed = graph.seed, seed
    try:
      return ds.shuffle(buffer_size, seed=seed)
    finally:
      graph.seed = previous
  return tf.function(build)(ds) if tf.executing_eagerly() else build(ds)


def shuffled_repeat(ds, config, seeded, cache=True):
  """A TRAIN pipeline's examples: cached in memory (unless not `cache`),
  shuffled (seeded unless not `seeded`: see data.make_input_fn; seeded, in
  one order in every engine), repeated. The order is the same either way."""
  if cache:
    ds = ds.cache()
  if config.shuffle_buffer:
    ds = (_shuffled(ds, config.shuffle_buffer, config.seed) if seeded else
          ds.shuffle(config.shuffle_buffer))
  return ds.repeat()


def with_eval_padding(ds, padding, padded_size):
  """`ds`'s elements (tuples, or single tensors) each with weight 1.0, then
  `padding` (an element's tensors) with weight 0.0, to `padded_size`
  (eval_padded_size) elements."""
  padding = tf.data.Dataset.from_tensors((*padding, 0.0)).repeat()
  return ds.map(lambda *element: (*element, 1.0)).concatenate(
      padding).take(padded_size)


def make_input_fn(config, global_batch_size, examples, num_test, padding,
                  batch_features, seeded=True, augment=None, train_window=1,
                  cache=None):
  """Returns `input_fn(mode, input_context=None)` over one source.

  The source's part: `examples(split, num_pipelines=1, pipeline_id=0)`, its
  dataset of a split (that pipeline's shard); `num_test` examples in TEST;
  `padding()`, an element's tensors (EVAL's weight-0 filler, made in the
  caller's graph);
  `batch_features(mode)`, called in the caller's graph, a function of a
  batch of elements (and in EVAL its padding mask) to `(features, labels)`
  (PREDICT: the features). Optional: `augment(ds, pipeline_id)` of TRAIN's
  examples after the cache, TRAIN windows of `train_window` batches, and
  `cache(num_pipelines)`, whether TRAIN's examples are cached in memory
  (default: they are).

  TRAIN reads the pipeline's shard of the train split (cache, shuffle,
  repeat, batch); EVAL each test example exactly once, padded with weight-0
  examples to whole steps on every pipeline; PREDICT the first
  `config.num_predictions` test examples. Unless `seeded`, each run
  shuffles in an order of its own (data.make_input_fn says why).
  """
  def input_fn(mode, input_context=None):
    num_pipelines, pipeline_id, batch_size, local_replicas = pipeline_layout(
        mode, input_context, global_batch_size)
    features = batch_features(mode)

    if mode == ModeKeys.PREDICT:
      ds = examples(TEST).take(config.num_predictions)
      return ds.batch(batch_size).map(features).prefetch(tf.data.AUTOTUNE)

    split = TRAIN if mode == ModeKeys.TRAIN else TEST
    if num_pipelines > 1:
      _logger.info('Input pipeline %d of %d reads its shard of %s',
                   pipeline_id, num_pipelines, split)
    ds = examples(split, num_pipelines, pipeline_id)
    if mode == ModeKeys.TRAIN:
      ds = shuffled_repeat(ds, config, seeded,
                           cache is None or cache(num_pipelines))
      if augment:
        ds = augment(ds, pipeline_id)
      ds = ds.batch(batch_size, drop_remainder=True).map(
          features, num_parallel_calls=tf.data.AUTOTUNE)
      if train_window > 1:
        ds = ds.batch(train_window, drop_remainder=True)
    else:
      ds = with_eval_padding(
          ds, padding(),
          eval_padded_size(num_test, num_pipelines, local_replicas,
                           batch_size))
      ds = ds.batch(batch_size).map(features,
                                    num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(PIPELINE_OPTIONS)

  return input_fn
