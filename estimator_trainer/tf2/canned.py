"""A canned Estimator's checkpoint (LinearClassifier, DNNClassifier,
DNNLinearCombinedClassifier, their regressors) carried over to the
package's `linear`, `dnn` or `wide_deep` model (tf2/migration.py calls it).

Its shape is read off the checkpoint: the parts (`linear/linear_model/`,
`dnn/hiddenlayer_<i>/`), the hidden units, each part's optimizer (its
slots, `training/<Optimizer>/<variable>/<slot>`). Its inputs are the feature
spec's (tabular/feature_columns.py made it of the same columns): the
canned DNN concatenates its inputs sorted by feature column name
(`age`, `color_embedding`, `size_indicator`), the package's by column name,
so the first hidden kernel's rows are reordered; a categorical column's
rows are reordered as feature_columns.canned_ids says. A row with no
canned counterpart (an id canned drops) is zero, its slots the package's
initial ones. A regression's weights absorb the package's label scale.
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

_LINEAR = 'linear/linear_model'
_DNN_INPUT = 'dnn/input_from_feature_columns/input_layer'
# Keras optimizers' slots in canned checkpoints and in the package's
# optimizers (their lists, indexed as the variables they were built on).
SLOTS = {'adagrad': (('accumulator', '_accumulators'),),
         'ftrl': (('accumulator', '_accumulators'), ('linear', '_linears')),
         'adam': (('m', '_momentums'), ('v', '_velocities')), 'sgd': ()}
_SLOT = re.compile(r'training/(\w+)/(linear|dnn)/')


def is_canned(stored):
  """Whether checkpoint keys `stored` are a canned Estimator's."""
  return any(key.startswith((f'{_LINEAR}/', 'dnn/hiddenlayer_0/'))
             for key in stored)


def shape(stored):
  """(model, model_kwargs, the deep part's optimizer, the linear part's):
  the package's counterpart of the canned model of checkpoint keys
  `stored` (name -> shape); a part's optimizer None if it has none."""
  hidden, index = [], 0
  while f'dnn/hiddenlayer_{index}/bias' in stored:
    hidden.append(int(stored[f'dnn/hiddenlayer_{index}/bias'][0]))
    index += 1
  parts = {'linear': None, 'dnn': None}
  for part in parts:
    present = part == 'dnn' and hidden or part == 'linear' and any(
        key.startswith(f'{_LINEAR}/') for key in stored)
    found = {m.group(1).lower() for m in map(_SLOT.match, stored)
             if m and m.group(2) == part}
    if present:
      parts[part] = found.pop() if found else 'sgd'
  if parts['linear'] and hidden:
    model = 'wide_deep'
  else:
    model = 'dnn' if hidden else 'linear'
  kwargs = {'hidden_units': hidden} if hidden else {}
  if hidden and any(key.startswith(_DNN_INPUT) and '_X_' in key
                    for key in stored):
    kwargs['embed_crosses'] = True
  return model, kwargs, parts['dnn'], parts['linear']


@dataclasses.dataclass(frozen=True)
class Placement:
  """A package weight's canned variable `key`; `rows`: for each of its
  rows (axis 0) canned's, -1 for none (None: all, in order); `scale`,
  `shift`: its value is (canned's - shift) * scale (a regression's label
  scale)."""

  key: str
  rows: object = None
  scale: float = 1.0
  shift: float = 0.0


def _canned_name(item):
  """A spec column's (or cross's) canned categorical/numeric column name."""
  if isinstance(item, spec_lib.Cross):  # Named sorted, hashed in order.
    return '_X_'.join(sorted(item.columns))
  if item.kind == 'float_discretized':
    return f'{item.source or item.name}_bucketized'
  return item.name


def _dnn_rows(model, items, inputs, stored):
  """The first hidden kernel's canned row of each of its rows: the pieces
  of the package's input layer in its order, each at its canned offset."""
  package, canned = [], {}
  layers = {layer.name for layer in model.layers}
  for name in sorted(inputs):
    encoded, item = inputs[name], items[name]
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


def placements(model, spec, inputs, stored, label_scale=None):
  """layer weight name (`dnn/hidden_0/kernel`) -> Placement, for every
  weight of `model` (the package's, of `spec`'s Encoder `inputs`) that
  has a canned counterpart in checkpoint keys `stored`."""
  items = {item.name: item for item in spec.columns + spec.crosses}
  by_scope = {scope_name(name): name for name in inputs}
  mean, stddev = label_scale or (0.0, 1.0)
  found = {}

  def place(weight, key, rows=None, logits=False, bias=False):
    if key in stored:
      found[weight] = Placement(key, rows, 1 / stddev if logits else 1.0,
                                mean if bias else 0.0)

  linear_bias = 'logits' if model.name == 'linear' else 'linear/bias'
  place(f'{linear_bias}/bias', f'{_LINEAR}/bias_weights', logits=True,
        bias=True)
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
              f'{_LINEAR}/{_canned_name(item)}/weights', rows, logits=True)
      else:
        place(f'{layer.name}/embeddings', f'{_DNN_INPUT}/'
              f'{_canned_name(item)}_embedding/embedding_weights', rows)
  hidden = [layer.name for layer in model.layers
            if layer.name.startswith('dnn/hidden_')]
  for index, name in enumerate(hidden):
    rows = _dnn_rows(model, items, inputs, stored) if index == 0 else None
    place(f'{name}/kernel', f'dnn/hiddenlayer_{index}/kernel', rows)
    place(f'{name}/bias', f'dnn/hiddenlayer_{index}/bias')
  if hidden:
    logits = 'logits' if model.name == 'dnn' else 'dnn/logits'
    place(f'{logits}/kernel', 'dnn/logits/kernel', logits=True)
    # wide_deep's mean is the linear bias's.
    place(f'{logits}/bias', 'dnn/logits/bias', logits=True,
          bias=model.name == 'dnn')
  return found


def value(placement, canned, initial):
  """The package weight's (or slot's) value: `canned`'s rows placed,
  `initial`'s where canned has none."""
  canned = (np.asarray(canned, np.float32) - placement.shift) * (
      placement.scale)
  if placement.rows is None:
    return canned
  rows = np.asarray(placement.rows)
  result = np.array(initial, np.float32)
  result[rows >= 0] = canned[rows[rows >= 0]]
  return result


def _weight_key(weight):
  return weight.name.split(':')[0]


def carry(job, reader, checkpoint, optimizer_names):
  """Sets `job`'s model weights and its optimizers' slots (`optimizer_names`:
  optimizer -> its name in SLOTS) and `iterations` (the global step) of
  canned checkpoint `checkpoint` (`reader` reads it). Returns the canned
  keys placed."""
  stored = reader.get_variable_to_shape_map()
  found = placements(job.model, job.source.feature_spec,
                     job.source.spec.model_input, stored,
                     job.source.spec.label_scale)
  placed = {'global_step'}
  for weight in job.model.weights:
    placement = found.get(_weight_key(weight))
    if placement:
      # No canned row: zero, as canned's dropped id or absent input adds.
      weight.assign(value(placement, reader.get_tensor(placement.key),
                          np.zeros(weight.shape, np.float32)))
      placed.add(placement.key)
  slots = {}
  for key in stored:
    match = re.fullmatch(r'training/\w+/(.+)/(\w+)', key)
    if match:
      slots[match.groups()] = key
  step = int(reader.get_tensor('global_step'))
  for optimizer, part in job.optimizer_parts:
    optimizer.build(part)
    optimizer.iterations.assign(step)
    inner = getattr(optimizer, 'inner_optimizer', optimizer)
    for canned_slot, attribute in SLOTS[optimizer_names[optimizer]]:
      for index, variable in enumerate(part):
        placement = found.get(_weight_key(variable))
        key = placement and slots.get((placement.key, canned_slot))
        if key:
          slot = getattr(inner, attribute)[index]
          # A slot's rows move with its weight's, unscaled.
          slot.assign(value(dataclasses.replace(placement, scale=1.0,
                                                shift=0.0),
                            reader.get_tensor(key), slot.numpy()))
          placed.add(key)
  weights = {key for key in stored if not key.startswith('training/')}
  unplaced = sorted(weights - placed)
  if unplaced:
    raise TrainerError(f'{checkpoint}: cannot place {unplaced[0]} in the '
                       'model of the feature spec: give the canned '
                       "model's columns")
  return step


def save_for_estimator(job, optimizer_names, step):
  """Writes `job`'s carried weights and slots as the package's estimator
  engine names them (job.weight_names; a slot `<weight>/<v1 slot>`,
  optimizers.SLOTS) into its model_dir at `step`."""
  values = dict(zip(job.weight_names, (w.numpy() for w in job.model.weights)))
  name_of = {w.ref(): n for w, n in zip(job.model.weights, job.weight_names)}
  for optimizer, part in job.optimizer_parts:
    name = optimizer_names[optimizer]
    inner = getattr(optimizer, 'inner_optimizer', optimizer)
    for v1_slot, attribute in optimizers.SLOTS[name]:
      for index, variable in enumerate(part):
        values[f'{name_of[variable.ref()]}/{v1_slot}'] = getattr(
            inner, attribute)[index].numpy()
    if name == 'adam':  # tf.compat.v1's Adam counts its steps in them.
      values['beta1_power'] = np.float32(optimizers.ADAM_BETA_1**(step + 1))
      values['beta2_power'] = np.float32(optimizers.ADAM_BETA_2**(step + 1))
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
