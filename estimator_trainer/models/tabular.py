"""Models of encoded tabular features: the Keras counterparts of the canned
Estimators' LinearClassifier (`linear`), DNNClassifier (`dnn`) and
DNNLinearCombinedClassifier (`wide_deep`).

A builder is called as `builder(inputs, logits_dimension, seed=None,
**model_kwargs)`, `inputs` the Encoder's dict name -> EncodedInput (`kind`
'dense' with `width`, or 'ids' with `cardinality`; `embedding_dim`;
`cross`; or the dict of those fields), and returns an uncompiled `tf.keras.Model` taking a dict of the
encoded tensors (float32 [batch, width] or int64 ids [batch], one
`tf.keras.Input` per name, named as it) to float32 logits
[batch, logits_dimension].

Every layer is named (Estimator checkpoints are keyed by name): the wide
part's under `linear/`, the deep part's under `dnn/` (`variables_by_part`
splits them for an optimizer per part), the output layer `logits`.
Embeddings are partitioning.Embedding: split across parameter servers.
Initial values as the canned Estimators': the linear weights and bias
zero, hidden layers Glorot-uniform, embeddings truncated normal of
standard deviation 1/sqrt(width); seeded per layer as layers.initializer
seeds the image models'.
"""

import collections.abc
import math
import re
import types

import tensorflow as tf

from estimator_trainer import partitioning
from estimator_trainer.errors import UsageError
from estimator_trainer.models import layers
from estimator_trainer.models import numeric_embedding as periodic

PARTS = ('linear', 'dnn')
_FIELDS = ('kind', 'width', 'cardinality', 'embedding_dim', 'cross',
           'one_hot', 'parts')
HIDDEN_UNITS = (128, 64)
_BATCH_NORM = {'momentum': layers.BN_MOMENTUM, 'epsilon': layers.BN_EPSILON}
MAX_EMBEDDING_DIM = 16


def default_embedding_dim(cardinality):
  """TensorFlow's rule of thumb, 6 x the 4th root of the cardinality,
  at most MAX_EMBEDDING_DIM."""
  return min(MAX_EMBEDDING_DIM, math.ceil(6 * cardinality ** 0.25))


@tf.keras.utils.register_keras_serializable(package='estimator_trainer')
class Bias(tf.keras.layers.Layer):
  """Adds one trainable bias vector (the linear model's `bias_weights`),
  initially zero: the wide part's per-column weights have none."""

  def build(self, input_shape):
    self.bias = self.add_weight(
        name='bias', shape=[input_shape[-1]], initializer='zeros')
    super().build(input_shape)

  def call(self, inputs):
    return inputs + self.bias


def scope_name(name):
  """Column `name` as a graph's name scope takes it (Estimator's graph
  names variables by scope): other characters become '_', and a name that
  cannot start a scope gets a prefix. The model's inputs stay keyed by
  the column names."""
  name = re.sub(r'[^A-Za-z0-9_.\-]', '_', name)
  return name if re.match(r'[A-Za-z0-9.]', name) else f'input{name}'


def _inputs(inputs):
  """(name -> tf.keras.Input, names in sorted order: the canned input
  layer's, so that layers and seeds do not depend on the dict's order,
  name -> EncodedInput fields as attributes: `inputs` may hold their dicts,
  as model_fn's params do)."""
  if not inputs:
    raise UsageError('--model: the feature spec has no input columns')
  inputs = {name: types.SimpleNamespace(**{
      field: value.get(field) for field in _FIELDS})
            if isinstance(value, collections.abc.Mapping) else value
            for name, value in inputs.items()}
  by_scope = {}
  for name in sorted(inputs):
    other = by_scope.setdefault(scope_name(name), name)
    if other != name:  # Two layers of one name: Keras would refuse them.
      raise UsageError(f'--model: columns {other!r} and {name!r} have the '
                       f"same variable name {scope_name(name)!r}; rename "
                       'one')
  keras_inputs = {}
  for name, encoded in inputs.items():
    if encoded.kind == 'dense':
      keras_inputs[name] = tf.keras.Input(
          (encoded.width,), name=scope_name(name), dtype='float32')
    elif encoded.kind == 'ids':
      keras_inputs[name] = tf.keras.Input((), name=scope_name(name),
                                          dtype='int64')
    else:
      raise UsageError(f'--model: input {name!r} has kind {encoded.kind!r}'
                       ", not 'dense' or 'ids'")
  return keras_inputs, sorted(inputs), inputs


def _concatenate(pieces, name):
  return pieces[0] if len(pieces) == 1 else tf.keras.layers.Concatenate(
      name=name)(pieces)


def _sum(terms, name, dtype=None):
  return terms[0] if len(terms) == 1 else tf.keras.layers.Add(
      name=name, dtype=dtype)(terms)


def _linear_logits(keras_inputs, names, inputs, logits_dimension,
                   output_name):
  """The wide part: a weighted sum of every input (ids: a row of weights
  per id, as a sparse weighted sum; dense: a kernel) plus one bias.

  In float32 whatever the policy: lookups gain nothing from bfloat16, and
  a sum of many weights would lose digits. Initially zero, as canned: a
  linear model needs no symmetry breaking."""
  terms = []
  for name in names:
    layer_name = f'linear/weights_{scope_name(name)}'
    if inputs[name].kind == 'ids':
      layer = partitioning.Embedding(
          inputs[name].cardinality, logits_dimension, name=layer_name,
          embeddings_initializer='zeros', dtype='float32')
    else:
      layer = tf.keras.layers.Dense(
          logits_dimension, use_bias=False, name=layer_name,
          kernel_initializer='zeros', dtype='float32')
    terms.append(layer(keras_inputs[name]))
  weighted_sum = _sum(terms, 'linear/weighted_sum', 'float32')
  return Bias(name=output_name, dtype='float32')(weighted_sum)


def _check_dnn_kwargs(hidden_units, dropout, embedding_dim, batch_norm):
  if not hidden_units or any(int(u) != u or u < 1 for u in hidden_units):
    raise UsageError('--model_kwargs: hidden_units must be a non-empty list '
                     f'of positive integers, got {hidden_units!r}')
  if dropout is not None and not 0 <= dropout < 1:
    raise UsageError(f'--model_kwargs: dropout must be in [0, 1), got '
                     f'{dropout!r}')
  if not isinstance(batch_norm, bool) and not (
      isinstance(batch_norm, dict) and set(batch_norm) <= set(_BATCH_NORM)):
    raise UsageError('--model_kwargs: batch_norm must be true, false or an '
                     f'object of momentum and epsilon, got {batch_norm!r}')
  if embedding_dim is not None and (int(embedding_dim) != embedding_dim or
                                    embedding_dim < 1):
    raise UsageError('--model_kwargs: embedding_dim must be a positive '
                     f'integer, got {embedding_dim!r}')


def _dnn_logits(keras_inputs, names, inputs, logits_dimension, seeds,
                hidden_units, dropout, activation, batch_norm,
                sync_batch_norm, embedding_dim, embed_crosses,
                numeric_embedding, output_name):
  """The deep part: ids embedded (crosses only if `embed_crosses`),
  concatenated with the dense inputs (first, as one NumericEmbedding, if
  `numeric_embedding`), through the hidden layers."""
  _check_dnn_kwargs(hidden_units, dropout, embedding_dim, batch_norm)
  embed = periodic.settings(numeric_embedding)
  pieces, numbers = [], []
  for name in names:
    encoded = inputs[name]
    if encoded.kind == 'dense':
      (numbers if embed else pieces).append(keras_inputs[name])
    elif getattr(encoded, 'one_hot', False):  # Canned indicator_column's.
      pieces.append(tf.keras.layers.CategoryEncoding(
          encoded.cardinality, output_mode='one_hot',
          name=f'dnn/one_hot_{scope_name(name)}')(keras_inputs[name]))
    elif embed_crosses or not encoded.cross:
      width = (encoded.embedding_dim or embedding_dim or
               default_embedding_dim(encoded.cardinality))
      pieces.append(partitioning.Embedding(
          encoded.cardinality, width,
          embeddings_initializer=seeds(
              tf.keras.initializers.TruncatedNormal,
              stddev=1 / math.sqrt(width)),
          name=f'dnn/embedding_{scope_name(name)}')(keras_inputs[name]))
  if numbers:
    pieces.insert(0, periodic.NumericEmbedding(
        **embed, seeds=(seeds.next(), seeds.next()),
        name='dnn/numeric_embedding')(_concatenate(numbers, 'dnn/numbers')))
  if not pieces:
    raise UsageError('--model: the deep part has no inputs (only crosses; '
                     'pass embed_crosses=true in --model_kwargs)')
  x = _concatenate(pieces, 'dnn/inputs')
  for index, units in enumerate(hidden_units):
    x = tf.keras.layers.Dense(
        int(units), activation=activation, name=f'dnn/hidden_{index}',
        kernel_initializer=seeds(tf.keras.initializers.GlorotUniform))(x)
    # Dropout before batch norm: the canned DNN's order.
    if dropout:
      x = tf.keras.layers.Dropout(dropout, seed=seeds.next(),
                                  name=f'dnn/dropout_{index}')(x)
    if batch_norm:
      x = tf.keras.layers.BatchNormalization(
          **{**_BATCH_NORM, **(batch_norm if isinstance(batch_norm, dict)
                               else {})},
          synchronized=sync_batch_norm, name=f'dnn/batch_norm_{index}')(x)
  # float32 logits: the loss and the sigmoid or softmax need its range.
  return tf.keras.layers.Dense(
      logits_dimension, name=output_name, dtype='float32',
      kernel_initializer=seeds(tf.keras.initializers.GlorotUniform))(x)


def linear(inputs, logits_dimension, seed=None):
  """LinearClassifier's model: sum over inputs of their weights, plus a
  bias."""
  keras_inputs, names, inputs = _inputs(inputs)
  del seed  # Its initial weights are zeros.
  logits = _linear_logits(keras_inputs, names, inputs, logits_dimension,
                          'logits')
  return tf.keras.Model(keras_inputs, logits, name='linear')


def dnn(inputs, logits_dimension, seed=None, hidden_units=HIDDEN_UNITS,
        dropout=None, activation='relu', batch_norm=False,
        sync_batch_norm=False, embedding_dim=None, embed_crosses=False,
        numeric_embedding=None):
  """DNNClassifier's model: ids embedded (width: the column's
  `embedding_dim`, else `embedding_dim`, else `default_embedding_dim`),
  with the dense inputs, through `hidden_units` (activation `activation`, a
  Keras name; dropout `dropout`; batch norm if `batch_norm`, true or its
  {momentum, epsilon}), to the logits. Crosses are the wide part's: left
  out unless `embed_crosses`. `numeric_embedding` (true, or an object of
  numeric_embedding.DEFAULTS' keys): the numbers' periodic embeddings."""
  keras_inputs, names, inputs = _inputs(inputs)
  logits = _dnn_logits(keras_inputs, names, inputs, logits_dimension,
                       layers.Seeds(seed), tuple(hidden_units), dropout,
                       activation, batch_norm, sync_batch_norm,
                       embedding_dim, embed_crosses, numeric_embedding,
                       'logits')
  return tf.keras.Model(keras_inputs, logits, name='dnn')


def wide_deep(inputs, logits_dimension, seed=None, hidden_units=HIDDEN_UNITS,
              dropout=None, activation='relu', batch_norm=False,
              sync_batch_norm=False, embedding_dim=None,
              embed_crosses=False, numeric_embedding=None):
  """DNNLinearCombinedClassifier's model: the logits of a linear model of
  the ids (categorical, hashed, discretized, crosses) plus `dnn`'s (its
  arguments) of the dense and embedded ids; an input's `parts` (canned's
  linear_ and dnn_feature_columns) in those parts alone."""
  keras_inputs, names, inputs = _inputs(inputs)
  parts = {name: getattr(inputs[name], 'parts', None) or (
      PARTS if inputs[name].kind == 'ids' else ('dnn',)) for name in names}
  wide = [name for name in names if 'linear' in parts[name]]
  if not wide:
    raise UsageError('--model wide_deep: no categorical, hashed or '
                     'discretized column for the wide part (use --model=dnn)')
  linear_logits = _linear_logits(keras_inputs, wide, inputs,
                                 logits_dimension, 'linear/bias')
  dnn_logits = _dnn_logits(
      keras_inputs, [name for name in names if 'dnn' in parts[name]],
      inputs, logits_dimension, layers.Seeds(seed),
      tuple(hidden_units), dropout, activation, batch_norm, sync_batch_norm,
      embedding_dim, embed_crosses, numeric_embedding, 'dnn/logits')
  logits = tf.keras.layers.Add(name='logits', dtype='float32')(
      [linear_logits, dnn_logits])
  return tf.keras.Model(keras_inputs, logits, name='wide_deep')


BUILTINS = {'linear': linear, 'dnn': dnn, 'wide_deep': wide_deep}


def variables_by_part(model):
  """{'linear': [...], 'dnn': [...]}: the trainable variables of the wide
  and the deep part by their layers' names, for an optimizer per part
  (canned wide & deep: FTRL and Adagrad). A `linear` model is all wide, a
  `dnn` all deep; variables of neither part (a user's layers) raise."""
  parts = {part: [] for part in PARTS}
  for layer in model.layers:
    if not layer.trainable_weights:
      continue
    part = layer.name.split('/')[0]
    if layer.name == 'logits':
      part = model.name if model.name in PARTS else None
    if part not in parts:
      raise UsageError(f'--model {model.name}: layer {layer.name!r} is in '
                       f'neither part ({", ".join(PARTS)})')
    parts[part].extend(layer.trainable_weights)
  return parts


def linear_part(model):
  """The wide part's trainable variables, for --linear_optimizer: a model
  with a wide and a deep part (wide_deep, or a builder that names its layers
  as it does) has them."""
  parts = variables_by_part(model)
  if not parts['linear'] or not parts['dnn']:
    raise UsageError(f'--linear_optimizer: --model {model.name} has no '
                     f'{"wide" if not parts["linear"] else "deep"} part; '
                     'an optimizer per part needs --model=wide_deep (or '
                     'give --optimizer alone)')
  return parts['linear']
