"""Model builders of the kind users bring (`--model=builders:<name>` with
this directory on PYTHONPATH), good and bad."""

import random

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


def _in_float64(layer):
  config = {**layer.get_config(), 'dtype': 'float64'}
  if isinstance(layer, tf.keras.layers.BatchNormalization):
    # `synchronized` is not in its config.
    return type(layer)(**config, synchronized=layer.synchronized)
  return type(layer).from_config(config)


def unnamed_cnn(input_shape, num_classes, sync_batch_norm=False,
                momentum=0.99):
  """Three convolutions with batch norm and not one layer named, as most
  users' code is: Keras names them from its counters."""
  layers = tf.keras.layers
  x = images = layers.Input(input_shape)
  for filters in (8, 16, 16):
    x = layers.Conv2D(filters, 3, padding='same')(x)
    x = layers.ReLU()(layers.BatchNormalization(
        momentum=momentum, synchronized=sync_batch_norm)(x))
  x = layers.GlobalAveragePooling2D()(x)
  return tf.keras.Model(images, layers.Dense(num_classes, dtype='float32')(x))


def bn_cnn(input_shape, num_classes, seed=None, momentum=0.999,
           sync_batch_norm=False, conv_biases=True):
  """Two convolutions with batch norm, of momentum 0.999 as Keras
  Applications build it: after a few hundred steps its moving statistics
  are still mostly their initial values."""
  def init(index):
    return tf.keras.initializers.GlorotUniform(
        seed=None if seed is None else seed + index)

  return tf.keras.Sequential([
      tf.keras.layers.Input(input_shape),
      tf.keras.layers.Conv2D(8, 3, strides=2, kernel_initializer=init(0),
                             use_bias=conv_biases, name='conv1'),
      tf.keras.layers.BatchNormalization(
          momentum=momentum, synchronized=sync_batch_norm, name='bn1'),
      tf.keras.layers.ReLU(),
      tf.keras.layers.Conv2D(16, 3, strides=2, kernel_initializer=init(1),
                             use_bias=conv_biases, name='conv2'),
      tf.keras.layers.BatchNormalization(
          momentum=momentum, synchronized=sync_batch_norm, name='bn2'),
      tf.keras.layers.ReLU(),
      tf.keras.layers.GlobalAveragePooling2D(),
      tf.keras.layers.Dense(num_classes, kernel_initializer=init(2),
                            name='logits', dtype='float32'),
  ])


def bn_cnn_float64(input_shape, num_classes, seed=None,
                   sync_batch_norm=False):
  """bn_cnn computing in float64, logits included (the replicas' gradients
  are all-reduced packed together: one dtype), cast to float32 at the end:
  float32 rounding, amplified through batch norm's backward pass, would
  hide whether two computations are the same one. Its convolutions have
  no bias, as ResNet-20's: batch norm's mean cancels a bias, whose change
  would be rounding alone."""
  with tf.Graph().as_default():  # Leaves no unused variables behind.
    original = bn_cnn(input_shape, num_classes, seed=seed,
                      sync_batch_norm=sync_batch_norm, conv_biases=False)
  model = tf.keras.models.clone_model(original, clone_function=_in_float64)
  logits = tf.keras.layers.Activation('linear', dtype='float32')(
      model.output)
  return tf.keras.Model(model.input, logits)


def mobilenet_v2(input_shape, num_classes, seed=None):
  """Keras Applications' MobileNetV2, untrained, at its smallest width."""
  if seed is not None:
    # Its initializers take no seed: Keras draws theirs from Python's random.
    random.seed(seed)
  return tf.keras.applications.MobileNetV2(
      weights=None, input_shape=input_shape, classes=num_classes, alpha=0.35,
      classifier_activation=None)
