"""The `input_fn` over a TabularSource, on the shared pipeline
(pipeline.py): records, batched, then parsed and encoded a batch at once."""

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer import pipeline
from estimator_trainer.errors import UsageError
from estimator_trainer.pipeline import ModeKeys
from estimator_trainer.sources import TEST
from estimator_trainer.tabular.encoder import Encoder

# The features' key of each example's weight (the weight column's value;
# in evaluation 0 for padding).
WEIGHT = models.WEIGHT


def head(config, feature_spec):
  """The run's head: --head, else the feature spec's, else multiclass."""
  return getattr(config, 'head', None) or feature_spec.head or 'multiclass'


def make_input_fn(config, global_batch_size, source, statistics, seeded=True,
                  encoder=None):
  """Returns `input_fn(mode, input_context=None)` for Estimator and the TF2
  engines, yielding `(features, labels)`: features the Encoder's dict plus
  WEIGHT (TRAIN: the weight column's, absent without one; EVAL: 0 for
  padding, else the weight column's or 1) and in EVAL models.PADDING,
  labels the head's (Encoder.encode_label). PREDICT: the first
  `config.num_predictions` test examples' features.

  TRAIN reads the pipeline's shard of the train split (cache, shuffle,
  repeat, batch); EVAL each test example exactly once, padded with weight-0
  examples to whole steps on every pipeline. Unless `seeded`, each run
  shuffles in an order of its own (data.make_input_fn says why).

  Each call builds its Encoder in the caller's graph (Estimator's), unless
  given `encoder`: for TF2 parameter-server training, whose guide builds
  preprocessing layers under the strategy's scope, outside the dataset
  function, so that each worker gets a copy of their tables (not tried
  here yet).
  """
  feature_spec = source.feature_spec
  names = [c.name for c in feature_spec.columns] + [
      c.name for c in feature_spec.crosses]
  for reserved, meaning in ((WEIGHT, 'the example weights'),
                            (models.PADDING, "evaluation's padding")):
    if reserved in names:
      raise UsageError(f"feature spec: a feature named '{reserved}' (the "
                       f"input's key of {meaning}); rename it")
  head_name = head(config, feature_spec)
  num_test = source.num_examples(TEST)  # Validates the data before any graph.

  def batch_features(mode):
    # Here, not in a map function: the tables live in the caller's graph,
    # where Estimator's scaffold initialises them.
    encoding = encoder or Encoder(feature_spec, statistics)

    def features(records, mask=None):
      raw, label, weight = source.parse(records)
      encoded = encoding(raw)
      if mode == ModeKeys.PREDICT:  # As serving: no weight, no label.
        return encoded
      if mask is not None:
        pipeline.eval_weights(encoded, mask, weight)
      elif weight is not None:
        encoded[WEIGHT] = weight
      return encoded, encoding.encode_label(label, head_name)
    return features

  return pipeline.make_input_fn(
      config, global_batch_size, source.records, num_test,
      lambda: (tf.constant(source.padding_record),), batch_features, seeded)
