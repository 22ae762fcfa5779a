"""model_dir's checkpoints: which step is latest, whether there is one, and
whether it fits the model, before Estimator runs.

Estimator restores model_dir's latest checkpoint by variable name. A
checkpoint of another model fails only in session creation, after training
has written events to model_dir, with a first line that names neither the
directory nor the variable.
"""

import os

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer.sources import IMAGE_SHAPE
from estimator_trainer.errors import TrainerError


def require_checkpoint(model_dir):
  """Fails unless model_dir holds a checkpoint (to evaluate, export...)."""
  if not tf.train.latest_checkpoint(model_dir):
    raise TrainerError(f'no checkpoint in {model_dir}; train first')


def latest_step(model_dir):
  """The step of model_dir's latest checkpoint; -1 without one."""
  path = tf.train.latest_checkpoint(model_dir)
  return layout.checkpoint_step(path) if path else -1


def check_compatible(model_dir, model_fn, params, training):
  """Fails unless model_dir's latest checkpoint can restore `model_fn`'s graph.

  Passes when there is no checkpoint. Training restores the optimizer's
  variables too; evaluation, prediction and export the model's alone.
  Variables the checkpoint has beyond those are fine, as for Estimator.
  """
  path = tf.train.latest_checkpoint(model_dir)
  if not path:
    return
  try:
    stored = dict(tf.train.list_variables(path))
  except tf.errors.OpError as e:
    raise TrainerError(f'cannot read checkpoint {path}: '
                       f'{e.message.strip().splitlines()[0]}') from None
  # EVAL restores the variables PREDICT has (its metrics' are local), so
  # PREDICT's graph serves both without building the metrics.
  mode = (tf.estimator.ModeKeys.TRAIN if training else
          tf.estimator.ModeKeys.PREDICT)
  expected = _graph_variables(model_fn, params, mode)
  missing = sorted(set(expected) - set(stored))
  reshaped = sorted(name for name in set(expected) & set(stored)
                    if list(stored[name]) != expected[name])
  if missing:
    more = f' and {len(missing) - 1} more' if len(missing) > 1 else ''
    problem = f'{os.path.basename(path)} lacks {missing[0]}{more}'
  elif reshaped:
    name = reshaped[0]
    problem = (f'{name} has shape {list(stored[name])} in '
               f'{os.path.basename(path)}, expected {expected[name]}')
  else:
    return
  raise TrainerError(
      f'{model_dir} holds a checkpoint of a different model: {problem}')


def _graph_variables(model_fn, params, mode):
  """Name -> shape of the variables Estimator would restore in `mode`."""
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()  # Estimator adds it too.
    features = {'image': tf.compat.v1.placeholder(tf.float32,
                                                  [None, *IMAGE_SHAPE])}
    labels = tf.compat.v1.placeholder(tf.int64, [None])
    model_fn(features, labels, mode, params)
    return {v.op.name: v.shape.as_list()
            for v in tf.compat.v1.global_variables()}
