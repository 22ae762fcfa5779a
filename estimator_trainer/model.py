"""The CNN every engine trains."""

import tensorflow as tf

from estimator_trainer.data import IMAGE_SHAPE, NUM_CLASSES


def create_model(seed=None, weight_decay=0.0):
  """Conv(32)-Pool-Conv(64)-Pool-Dense(64)-Dense(10) returning logits.

  Layers are named (conv1, conv2, hidden, logits) so that checkpoint variable
  names are stable, e.g. for warm-starting all but `logits/`.

  Each layer's initializer gets its own seed: `RunConfig(tf_random_seed)` does
  not fix Keras 2.15 initial weights, and explicit seeds keep replicas and
  reruns identical without touching global random state.
  """
  def init(index):
    return tf.keras.initializers.GlorotUniform(
        seed=None if seed is None else seed + index)

  regularizer = (tf.keras.regularizers.L2(weight_decay)
                 if weight_decay else None)
  return tf.keras.Sequential([
      tf.keras.layers.Input(IMAGE_SHAPE, name='image'),
      tf.keras.layers.Conv2D(32, 3, activation='relu', kernel_initializer=init(0),
                             kernel_regularizer=regularizer, name='conv1'),
      tf.keras.layers.MaxPooling2D(),
      tf.keras.layers.Conv2D(64, 3, activation='relu', kernel_initializer=init(1),
                             kernel_regularizer=regularizer, name='conv2'),
      tf.keras.layers.MaxPooling2D(),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(64, activation='relu', kernel_initializer=init(2),
                            kernel_regularizer=regularizer, name='hidden'),
      tf.keras.layers.Dense(NUM_CLASSES, kernel_initializer=init(3),
                            kernel_regularizer=regularizer, name='logits'),
  ], name='cnn')
