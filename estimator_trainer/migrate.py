"""An Estimator checkpoint's weights into the same model built by a TF2
engine.

Estimator keys a checkpoint by variable name, the names the model's layers
take when the model is built in a fresh graph (as in model_fn); a TF2
engine's checkpoint is object-based. The Keras model is the same in both, so
its weights in order name the checkpoint's tensors.
"""

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer.errors import TrainerError


def graph_names(builder, input_shape, num_classes, model_kwargs=None,
                **build_kwargs):
  """The checkpoint names of the model's weights, in `model.weights` order,
  as Estimator's model_fn creates them (a fresh graph: no uniquified
  names)."""
  with tf.Graph().as_default():
    model = models.build(builder, input_shape, num_classes, model_kwargs,
                         **build_kwargs)
    return [weight.name.split(':')[0] for weight in model.weights]


def load_estimator_weights(model, checkpoint, names):
  """Sets `model`'s weights from an Estimator `checkpoint`; `names` are its
  weights' checkpoint names (graph_names). Fails naming the first weight the
  checkpoint lacks or holds in another shape."""
  reader = tf.train.load_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  values = []
  for weight, name in zip(model.weights, names):
    if name not in shapes:
      raise TrainerError(f'{checkpoint} has no {name}')
    if list(shapes[name]) != weight.shape.as_list():
      raise TrainerError(f'{name} has shape {shapes[name]} in {checkpoint}, '
                         f'the model {weight.shape.as_list()}')
    values.append(reader.get_tensor(name))
  model.set_weights(values)
