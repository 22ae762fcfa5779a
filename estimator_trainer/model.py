"""The CNN every engine trains."""

import tensorflow as tf

from estimator_trainer.sources import IMAGE_SHAPE, NUM_CLASSES


def create_model(seed=None, weight_decay=0.0, precision='float32'):
  """Conv(32)-Pool-Conv(64)-Pool-Dense(64)-Dense(10) returning float32 logits.

  `precision='mixed_bfloat16'` computes every layer but the last in
  bfloat16, with float32 variables (the same checkpoints).

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
  dtype = tf.keras.mixed_precision.Policy(precision)
  return tf.keras.Sequential([
      tf.keras.layers.Input(IMAGE_SHAPE, name='image'),
      tf.keras.layers.Conv2D(32, 3, activation='relu', kernel_initializer=init(0),
                             kernel_regularizer=regularizer, name='conv1',
                             dtype=dtype),
      tf.keras.layers.MaxPooling2D(dtype=dtype),
      tf.keras.layers.Conv2D(64, 3, activation='relu', kernel_initializer=init(1),
                             kernel_regularizer=regularizer, name='conv2',
                             dtype=dtype),
      tf.keras.layers.MaxPooling2D(dtype=dtype),
      tf.keras.layers.Flatten(dtype=dtype),
      tf.keras.layers.Dense(64, activation='relu', kernel_initializer=init(2),
                            kernel_regularizer=regularizer, name='hidden',
                            dtype=dtype),
      # float32 logits: the loss and softmax need its range.
      tf.keras.layers.Dense(NUM_CLASSES, kernel_initializer=init(3),
                            kernel_regularizer=regularizer, name='logits',
                            dtype='float32'),
  ], name='cnn')
