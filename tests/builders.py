"""Model builders of the kind users bring (`--model=builders:<name>` with
this directory on PYTHONPATH), good and bad."""

import tensorflow as tf

NOT_CALLABLE = 3


def mlp(input_shape, num_classes, hidden=32):
  """A small MLP: what a user's own builder looks like."""
  return tf.keras.Sequential([
      tf.keras.layers.Input(input_shape),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(hidden, activation='relu', name='hidden'),
      tf.keras.layers.Dense(num_classes, name='logits', dtype='float32'),
  ])


def raises(input_shape, num_classes):
  raise ValueError(f'cannot build for {num_classes} classes')


def not_a_model(input_shape, num_classes):
  return {'layers': 2}


def wrong_width(input_shape, num_classes):
  return mlp(input_shape, 3)


def float16_logits(input_shape, num_classes):
  return tf.keras.Sequential([
      tf.keras.layers.Input(input_shape),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(num_classes, dtype='float16'),
  ])
