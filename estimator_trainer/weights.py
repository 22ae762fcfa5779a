"""Weights across engines: an Estimator checkpoint (keyed by variable name)
or a TF2 engine's (object-based) into a TF2 engine's model, whole or
filtered by name (warm start).

Estimator names variables as the model's layers name them when the model is
built in a fresh graph (as in model_fn; models.check returns those names).
The Keras model is the same in every engine, so its weights, in order, name
the checkpoint's tensors.
"""

import logging
import re

import numpy as np
import tensorflow as tf

from estimator_trainer.errors import TrainerError, first_line

_logger = logging.getLogger(__name__)

_OBJECT_GRAPH = '_CHECKPOINTABLE_OBJECT_GRAPH'


def is_object_based(stored):
  """Whether a checkpoint's name -> shape map is a TF2 (object-based) one."""
  return _OBJECT_GRAPH in stored


def read_weights(checkpoint, names, build_model):
  """The values `checkpoint` holds for a model's weights (`names`: theirs,
  in order, from models.check), None for one it lacks. An Estimator checkpoint is read by name;
  a TF2 engine's is restored into `build_model()`, a model of the same
  builder."""
  reader = tf.train.load_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  if is_object_based(shapes):
    scratch = build_model()
    tf.train.Checkpoint(model=scratch).restore(checkpoint).expect_partial()
    return [weight.numpy() for weight in scratch.weights]
  return [reader.get_tensor(name) if name in shapes else None
          for name in names]


def assign(model, names, values, checkpoint, selected=lambda weight, name:
           True):
  """Sets the `selected` weights of `model` to `values` (read_weights');
  fails naming the first one `checkpoint` lacks or holds in another shape.
  Returns how many were set."""
  count = 0
  for weight, name, value in zip(model.weights, names, values):
    if not selected(weight, name):
      continue
    if value is None:
      raise TrainerError(f'{checkpoint} has no {name}')
    if list(value.shape) != weight.shape.as_list():
      raise TrainerError(f'{name} has shape {list(value.shape)} in '
                         f'{checkpoint}, the model {weight.shape.as_list()}')
    weight.assign(value)
    count += 1
  return count


def warm_start(model, source, pattern, names, build_model, tables=None):
  """Estimator's warm start for the TF2 engines: the trainable weights whose
  name (as Estimator's `vars_to_warm_start` sees it, `conv1/kernel:0`)
  matches `pattern` from `source`, a checkpoint or model_dir of either
  engine (`build_model`: a model of the source's). `tables`: index in
  `model.weights` -> tabular/warm_start.Table, a weight whose rows are
  remapped (a new row keeps the model's initial one)."""
  checkpoint = (tf.train.latest_checkpoint(source)
                if tf.io.gfile.isdir(source) else source)
  if not checkpoint:
    raise TrainerError(f'--warm_start_from {source}: no checkpoint there')
  try:
    values = read_weights(checkpoint, names, build_model)
  except (tf.errors.OpError, ValueError) as e:
    raise TrainerError(f'--warm_start_from {checkpoint}: '
                       f'{first_line(e)}') from None
  selected = lambda weight, name: weight.trainable and re.match(
      pattern, f'{name}:0')
  remapped = {i: table for i, table in (tables or {}).items()
              if selected(model.weights[i], names[i])}
  for i, table in remapped.items():
    values[i] = remap_rows(values[i], model.weights[i].numpy(), table.rows)
  count = assign(model, names, values, checkpoint, selected)
  _logger.info('Warm-started %d of %d weights from %s%s', count,
               len(model.weights), checkpoint, remapped_note(
                   remapped.values()))


def remap_rows(value, initial, rows):
  """`initial` with row i set to `value`'s row rows[i] where that is not
  -1."""
  remapped = np.array(initial, copy=True)
  kept = rows >= 0
  remapped[kept] = value[rows[kept]]
  return remapped


def remapped_note(tables):
  """'; remapped rows of 2 by vocabulary: a (1 new value), b' of `tables`
  (tabular/warm_start.Tables), '' of none."""
  tables = list(tables)
  if not tables:
    return ''
  columns = dict.fromkeys(table.label for table in tables)
  return (f'; remapped rows of {len(tables)} by vocabulary: '
          f'{", ".join(columns)}')
