"""The `input_fn` over a TabularSource, on the shared pipeline
(pipeline.py): records, batched, then parsed and encoded a batch at once."""

import functools
import logging

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer import pipeline
from estimator_trainer.pipeline import ModeKeys
from estimator_trainer.sources import TEST, TRAIN
from estimator_trainer.tabular import rows
from estimator_trainer.tabular.encoder import Encoder

_logger = logging.getLogger(__name__)

# Where a TRAIN input_fn may stop (make_input_fn's `stage`): its batches of
# records, their parsed columns, or the encoded features (the engines').
STAGES = ('read', 'parse', 'encode')
# A TRAIN pipeline caches its records in memory while its share of the
# training files is at most this many bytes (a gzipped file counted
# GZIP_RATIO times); past it, it reads the files again every epoch, so
# that memory stays flat in the data's size (issue 50: a cached census-like
# record took 620 bytes, 430 of them the record's, so the 20M-row set's
# first epoch would have held 12 GB).
CACHE_BYTES = 1 << 30
GZIP_RATIO = 4


def head(config, feature_spec):
  """The run's head: --head, else the feature spec's, else multiclass."""
  return getattr(config, 'head', None) or feature_spec.head or 'multiclass'


def _files_bytes(files):
  return sum(tf.io.gfile.stat(path).length *
             (GZIP_RATIO if path.endswith('.gz') else 1) for path in files)


def make_input_fn(config, global_batch_size, source, statistics, seeded=True,
                  encoder=None, stage='encode'):
  """Returns `input_fn(mode, input_context=None)` for Estimator and the TF2
  engines, yielding `(features, labels)`: features the Encoder's dict (a
  column of any name) plus, under models.FeatureKeys.of its inputs, the
  example weights (TRAIN: the weight column's, absent without one; EVAL: 0
  for padding, else the weight column's or 1) and in EVAL the padding,
  labels the head's (Encoder.encode_label). PREDICT: the features of the
  first `config.num_predictions` test examples (of --predict_files, every
  one), each row's place and key forwarded (rows.py).

  TRAIN reads the pipeline's shard of the train split (cached while its
  files are at most CACHE_BYTES, shuffled, repeated, batched); EVAL each
  test example exactly once, padded with weight-0 examples to whole steps
  on every pipeline. Unless `seeded`, each run shuffles in an order of its
  own (data.make_input_fn says why).

  Each call builds its Encoder in the caller's graph (Estimator's), unless
  given `encoder`: for TF2 parameter-server training, whose guide builds
  preprocessing layers under the strategy's scope, outside the dataset
  function, so that each worker gets a copy of their tables (not tried
  here yet).

  `stage` (STAGES) cuts the pipeline short, for the benchmark's split of
  its time (`benchmark.tabular_parts`): 'read' yields the batches of
  records, 'parse' (raw, label[, weight]) as `source.parse` gives them.
  """
  if stage not in STAGES:
    raise ValueError(f'stage {stage!r} is not one of {STAGES}')
  feature_spec = source.feature_spec
  head_name = head(config, feature_spec)
  num_test = source.num_examples(TEST)  # Validates the data before any graph.

  def batch_features(mode):
    # Here, not in a map function: the tables live in the caller's graph,
    # where Estimator's scaffold initialises them.
    encoding = encoder or Encoder(feature_spec, statistics)
    keys = models.FeatureKeys.of(encoding.inputs)

    def features(records, mask=None):
      if stage == 'read':
        return records
      raw, label, weight = source.parse(records)
      if stage == 'parse':
        return (raw, label) if weight is None else (raw, label, weight)
      encoded = encoding(raw)
      if mask is not None:
        pipeline.eval_weights(encoded, mask, weight, keys)
      elif weight is not None:
        encoded[keys.weight] = weight
      return encoded, encoding.encode_label(label, head_name)
    return features

  def cache(num_pipelines):
    share = _files_bytes(source.files(TRAIN)) / num_pipelines
    if share <= CACHE_BYTES:
      return True
    _logger.info('Each input pipeline reads the training files every '
                 'epoch: its share, %.1f GB, is past the %.1f GB it caches in '
                 'memory', share / 1e9, CACHE_BYTES / 1e9)
    return False

  shared = pipeline.make_input_fn(
      config, global_batch_size, source.records, num_test,
      lambda: (tf.constant(source.padding_record),), batch_features, seeded,
      cache=cache)
  key_type = source.key and rows.key_dtype(source)

  def input_fn(mode, input_context=None):
    if mode != ModeKeys.PREDICT:
      return shared(mode, input_context)
    ds = rows.placed(source, TEST)
    if not config.predict_files:  # New data: every row.
      ds = ds.take(config.num_predictions)
    return ds.batch(global_batch_size).map(functools.partial(
        rows.features, source, encoder or Encoder(feature_spec, statistics),
        key_type)).prefetch(tf.data.AUTOTUNE)
  return input_fn
