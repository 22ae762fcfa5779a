"""A canned Estimator's checkpoint (LinearClassifier, DNNClassifier,
DNNLinearCombinedClassifier, their regressors) carried over to the
package's `linear`, `dnn` or `wide_deep` model (tf2/migration.py calls it).

Its settings are canned_settings.py's (the model, the optimizers, read off
the checkpoint and its graph). Its inputs are the feature
spec's (tabular/feature_columns.py made it of the same columns): the
canned DNN concatenates its inputs sorted by feature column name
(`age`, `color_embedding`, `size_indicator`), the package's by column name,
so the first hidden kernel's rows are reordered; a categorical column's
rows are reordered as feature_columns.canned_ids says. A row with no
canned counterpart (an id canned drops) is zero, its slots the package's
initial ones. A regression is carried in the label's own units (the
carried model_dir's statistics have label scale (0, 1)): the weights and
slots as canned's, so that a step on moves them as canned's does.
"""

import dataclasses
import os
import re

import numpy as np
import tensorflow as tf

from estimator_trainer import optimizers
from estimator_trainer.errors import TrainerError
from estimator_trainer.tabular import feature_columns
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.models.tabular import scope_name
from estimator_trainer.tf2 import canned_settings

_LINEAR = canned_settings.LINEAR
_DNN_INPUT = canned_settings.DNN_INPUT
# Keras optimizers' slots in canned checkpoints and in the package's
# optimizers (their lists, indexed as the variables they were built on).
SLOTS = {'adagrad': (('accumulator', '_accumulators'),),
         'ftrl': (('accumulator', '_accumulators'), ('linear', '_linears')),
         'adam': (('m', '_momentums'), ('v', '_velocities')), 'sgd': ()}
_MOMENTUM = (('momentum', 'momentums'),)
# The package's batch norm weights -> canned's (dnn/hiddenlayer_<i>/...).
_BATCH_NORM = ('gamma', 'beta', 'moving_mean', 'moving_variance')


@dataclasses.dataclass(frozen=True)
class Placement:
  """A package weight's canned variable `key`; `rows`: for each of its
  rows (axis 0) canned's, -1 for none (None: all, in order)."""

  key: str
  rows: object = None


def _canned_name(item):
  """A spec column's (or cross's) canned categorical/numeric column name."""
  if isinstance(item, spec_lib.Cross):  # Named sorted, hashed in order.
    return '_X_'.join(sorted(item.columns))
  if item.kind == 'float_discretized':
    return f'{item.source or item.name}_bucketized'
  # (A deep part's second column of a feature: its categorical column's.)
  return item.source or item.name


def _dnn_rows(model, items, inputs, stored):
  """The first hidden kernel's canned row of each of its rows: the pieces
  of the package's input layer in its order, each at its canned offset."""
  package, canned = [], {}
  layers = {layer.name for layer in model.layers}
  for name in sorted(inputs):
    encoded, item = inputs[name], items[name]
    if model.name == 'wide_deep' and 'dnn' not in (
        encoded.parts or ('dnn',)):  # The wide part's alone.
      continue
    if encoded.kind == 'dense':
      canned[_canned_name(item)] = np.arange(encoded.width)
      package.append((_canned_name(item), np.arange(encoded.width)))
    elif encoded.one_hot:
      ids = np.array(feature_columns.canned_ids(item, encoded.cardinality))
      canned[f'{_canned_name(item)}_indicator'] = np.arange(ids.max() + 1)
      package.append((f'{_canned_name(item)}_indicator', ids))
    elif f'dnn/embedding_{scope_name(name)}' in layers:  # (Not a cross's.)
      key = f'{_canned_name(item)}_embedding'
      width = model.get_layer(f'dnn/embedding_{scope_name(name)}').output_dim
      if f'{_DNN_INPUT}/{key}/embedding_weights' in stored:
        canned[key] = np.arange(width)
      package.append((key, np.arange(width)))
  offsets, offset = {}, 0
  for key in sorted(canned):  # Canned's input layer: sorted by name.
    offsets[key] = offset
    offset += len(canned[key])
  if offset != stored['dnn/hiddenlayer_0/kernel'][0]:
    raise TrainerError(
        f'the canned DNN takes {stored["dnn/hiddenlayer_0/kernel"][0]} '
        f'inputs, the feature spec\'s columns ({", ".join(sorted(canned))}) '
        f'{offset}: give the columns of the canned model')
  return np.concatenate([
      np.where(rows >= 0, rows + offsets[key], -1) if key in offsets else
      np.full(len(rows), -1) for key, rows in package])


def placements(model, spec, inputs, stored):
  """layer weight name (`dnn/hidden_0/kernel`) -> Placement, for every
  weight of `model` (the package's, of `spec`'s Encoder `inputs`) that
  has a canned counterpart in checkpoint keys `stored`."""
  items = {item.name: item for item in spec.columns + spec.crosses}
  by_scope = {scope_name(name): name for name in inputs}
  found = {}

  def place(weight, key, rows=None):
    if key in stored:
      found[weight] = Placement(key, rows)

  linear_bias = 'logits' if model.name == 'linear' else 'linear/bias'
  place(f'{linear_bias}/bias', f'{_LINEAR}/bias_weights')
  for layer in model.layers:
    match = re.fullmatch(r'(linear/weights|dnn/embedding)_(.+)', layer.name)
    if match:
      name = by_scope[match.group(2)]
      item, encoded = items[name], inputs[name]
      rows = (feature_columns.canned_ids(item, encoded.cardinality)
              if encoded.kind == 'ids' else None)
      weight = 'embeddings' if encoded.kind == 'ids' else 'kernel'
      if match.group(1) == 'linear/weights':
        place(f'{layer.name}/{weight}',
              f'{_LINEAR}/{_canned_name(item)}/weights', rows)
      else:
        place(f'{layer.name}/embeddings', f'{_DNN_INPUT}/'
              f'{_canned_name(item)}_embedding/embedding_weights', rows)
  hidden = [layer.name for layer in model.layers
            if layer.name.startswith('dnn/hidden_')]
  for index, name in enumerate(hidden):
    rows = _dnn_rows(model, items, inputs, stored) if index == 0 else None
    place(f'{name}/kernel', f'dnn/hiddenlayer_{index}/kernel', rows)
    place(f'{name}/bias', f'dnn/hiddenlayer_{index}/bias')
    for weight in _BATCH_NORM:
      place(f'dnn/batch_norm_{index}/{weight}',
            f'dnn/hiddenlayer_{index}/batchnorm_{index}/{weight}')
  if hidden:
    logits = 'logits' if model.name == 'dnn' else 'dnn/logits'
    place(f'{logits}/kernel', 'dnn/logits/kernel')
    place(f'{logits}/bias', 'dnn/logits/bias')
  return found


def value(placement, canned, initial):
  """The package weight's (or slot's) value: `canned`'s rows placed,
  `initial`'s where canned has none."""
  canned = np.asarray(canned, np.float32)
  if placement.rows is None:
    return canned
  rows = np.asarray(placement.rows)
  result = np.array(initial, np.float32)
  result[rows >= 0] = canned[rows[rows >= 0]]
  return result


def _weight_key(weight):
  return weight.name.split(':')[0]


def _slots(optimizer):
  """The canned slots of a canned_settings.Optimizer: (canned's slot
  name, the Keras optimizer's list of them)."""
  if optimizer.name == 'sgd' and (optimizer.kwargs or {}).get('momentum'):
    return _MOMENTUM
  return SLOTS[optimizer.name]


def carry(job, reader, checkpoint, canned_optimizers):
  """Sets `job`'s model weights and its optimizers' slots
  (`canned_optimizers`: the job's optimizer -> its canned_settings.Optimizer)
  and `iterations` (the global step) of canned checkpoint `checkpoint`
  (`reader` reads it). Returns the global step."""
  stored = reader.get_variable_to_shape_map()
  found = placements(job.model, job.source.feature_spec,
                     job.source.spec.model_input, stored)
  placed = {'global_step'}
  for weight in job.model.weights:
    placement = found.get(_weight_key(weight))
    if placement:
      # No canned row: zero, as canned's dropped id or absent input adds.
      weight.assign(value(placement, reader.get_tensor(placement.key),
                          np.zeros(weight.shape, np.float32)))
      placed.add(placement.key)
  step = int(reader.get_tensor('global_step'))
  for optimizer, part in job.optimizer_parts:
    optimizer.build(part)
    optimizer.iterations.assign(step)
    inner = getattr(optimizer, 'inner_optimizer', optimizer)
    canned = canned_optimizers[optimizer]
    for canned_slot, attribute in _slots(canned):
      for index, variable in enumerate(part):
        placement = found.get(_weight_key(variable))
        key = placement and (f'training/{canned.scope}/{placement.key}/'
                             f'{canned_slot}')
        if key and key in stored:
          slot = getattr(inner, attribute)[index]
          # A slot's rows move with its weight's.
          slot.assign(value(placement, reader.get_tensor(key),
                            slot.numpy()))
          placed.add(key)
  unplaced = sorted(key for key in set(stored) - placed
                    if not re.fullmatch(r'training/\w+/\w+', key))
  if unplaced:
    raise TrainerError(f'{checkpoint}: cannot place {unplaced[0]} in the '
                       'model of the feature spec: give the canned '
                       "model's columns")
  return step


def save_for_estimator(job, canned_optimizers, step):
  """Writes `job`'s carried weights and slots (`canned_optimizers` as
  carry's) as the package's estimator engine names them (job.weight_names;
  a slot `<weight>/<v1 slot>`, optimizers.slots) into its model_dir at
  `step`."""
  values = dict(zip(job.weight_names, (w.numpy() for w in job.model.weights)))
  name_of = {w.ref(): n for w, n in zip(job.model.weights, job.weight_names)}
  for optimizer, part in job.optimizer_parts:
    canned = canned_optimizers[optimizer]
    inner = getattr(optimizer, 'inner_optimizer', optimizer)
    for v1_slot, attribute in optimizers.slots(canned.name, canned.kwargs):
      for index, variable in enumerate(part):
        values[f'{name_of[variable.ref()]}/{v1_slot}'] = getattr(
            inner, attribute)[index].numpy()
    if canned.name == 'adam':  # tf.compat.v1's Adam counts its steps in them.
      kwargs = canned.kwargs or {}
      for power, beta in (('beta1_power', 'beta_1'), ('beta2_power', 'beta_2')):
        values[power] = np.float32(kwargs.get(
            beta, getattr(optimizers, f'ADAM_{beta.upper()}'))**(step + 1))
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    for key, array in values.items():
      tf.compat.v1.Variable(array, name=key)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(global_step.assign(step))
      return tf.compat.v1.train.Saver().save(
          session, os.path.join(job.config.model_dir, 'model.ckpt'),
          global_step=step)
