"""What an export of structured data serves: the raw columns of serialized
tf.Examples (or given by name) and the key column, the preprocessing made
in the graph that serves, and the signature keys TensorFlow 2 allows."""

import re

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import rows
from estimator_trainer.tabular.encoder import Encoder


def signature_key(name):
  """Column `name` as a TF2 SavedModel's signature input key (and any
  graph's op name): itself if it is one, else with each character other
  than A-Z, a-z, 0-9 and _ as _, and arg_ before a first character that is
  no letter. tf.saved_model.save keys a signature's inputs by their
  placeholders' op names after tf.function's parameter-name rule, so
  'mean radius' cannot be a key there (Estimator's signatures take any
  key)."""
  key = re.sub(r'[^A-Za-z0-9_]', '_', name)
  return key if re.match(r'[A-Za-z]', key) else f'arg_{key}'


class Serving:
  """What an export needs: raw columns of serialized tf.Examples, and the
  preprocessing (made in the graph that serves). `raw_signature`: column
  name -> its TensorSpec, named signature_key(name); `key`: the key column
  (name, dtype name), or None, which the predict signatures take and
  return."""

  def __init__(self, source, feature_spec, statistics, head, key=None):
    self._source = source
    self._head = head
    self._feature_spec = feature_spec
    self._statistics = statistics
    self.key = key
    columns = [(c.name, c.dtype) for c in feature_spec.data_columns]
    self.raw_signature = {
        name: tf.TensorSpec([None], tf.dtypes.as_dtype(dtype),
                            name=signature_key(name))
        for name, dtype in columns + [key] * bool(key)}
    by_key = {}
    for name, spec in self.raw_signature.items():
      other = by_key.setdefault(spec.name, name)
      if other != name:
        raise UsageError(f'feature spec: columns {other!r} and {name!r} have '
                         f'the same serving input name {spec.name!r} '
                         '(signature_key); rename one')

  def parse_examples(self, serialized):
    """The raw columns of serialized tf.Examples, and the key's."""
    raw = self._source.parse_examples(serialized)
    if self.key:
      raw[self.key[0]] = rows.parse_key(*self.key, serialized)
    return raw

  def forwarded(self, raw):
    """The forwarded features of `raw` (parse_examples' or the raw
    signature's): the key's, under the prefix the model's inputs leave
    free (models.FeatureKeys)."""
    if not self.key:
      return {}
    spec = self._feature_spec
    forward = models.FeatureKeys.of(dict.fromkeys(
        [c.name for c in spec.columns] + [c.name for c in spec.crosses])).forward
    return {forward + self.key[0]: raw[self.key[0]]}

  def encoder(self):
    return Encoder(self._feature_spec, self._statistics, labels=False)

  def encode(self, raw):
    return self.encoder()(raw)

  def encode_labeled(self, serialized):
    """(features, labels) of serialized tf.Examples with their labels (and
    weights, under models.FeatureKeys.of the encoded columns, as the
    input_fn keys them): TFMA's evaluation input."""
    raw, label, weight = self._source.parse_examples(serialized, labels=True)
    encoder = Encoder(self._feature_spec, self._statistics)
    features = encoder(raw)
    if weight is not None:
      features[models.FeatureKeys.of(encoder.inputs).weight] = weight
    return features, encoder.encode_label(label, self._head)
