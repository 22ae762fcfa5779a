"""The image builders: the seeds' CNN and the CIFAR ResNet-20, each called
as `builder(input_shape, num_classes, seed=None, ...)`."""

import tensorflow as tf

from estimator_trainer.models.layers import BN_EPSILON, BN_MOMENTUM
from estimator_trainer.models.layers import initializer


def cnn(input_shape=(28, 28, 1), num_classes=10, seed=None):
  """Conv(32)-Pool-Conv(64)-Pool-Dense(64)-Dense(classes): the seeds' CNN.

  Layers are named (conv1, conv2, hidden, logits) so that checkpoint variable
  names are stable, e.g. for warm-starting all but `logits/`.
  """
  def init(index):
    return initializer(tf.keras.initializers.GlorotUniform, seed, index)

  return tf.keras.Sequential([
      tf.keras.layers.Input(input_shape, name='image'),
      tf.keras.layers.Conv2D(32, 3, activation='relu', kernel_initializer=init(0),
                             name='conv1'),
      tf.keras.layers.MaxPooling2D(),
      tf.keras.layers.Conv2D(64, 3, activation='relu', kernel_initializer=init(1),
                             name='conv2'),
      tf.keras.layers.MaxPooling2D(),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(64, activation='relu', kernel_initializer=init(2),
                            name='hidden'),
      # float32 logits: the loss and softmax need its range.
      tf.keras.layers.Dense(num_classes, kernel_initializer=init(3),
                            name='logits', dtype='float32'),
  ], name='cnn')


def resnet20(input_shape=(32, 32, 3), num_classes=10, seed=None,
             sync_batch_norm=False):
  """The CIFAR ResNet-20 of He et al. (2016), section 4.2.

  A 3x3 convolution of 16 filters, three stages of three basic blocks (two
  3x3 convolutions each; 16, 32, 64 filters; stride 2 at the start of stages
  2 and 3), batch norm after every convolution, global average pooling and a
  dense logits layer. Shortcuts that change shape are the paper's option A:
  subsampled identity, zero-padded to the new width (no parameters).
  With 10 classes at 32x32x3: 269,722 trainable parameters (and 1,376 moving
  statistics) and 40,551,040 multiply-adds forward: the first convolution
  32*32*16 outputs x 3*3*3 = 442,368; each of the 18 block convolutions
  2,359,296 (32*32*16 x 3*3*16 in stage 1, 16*16*32 x 3*3*32 and 8*8*64 x
  3*3*64 after), except the first of stages 2 and 3, 1,179,648 each (half the
  input channels); the logits 64 x 10 = 640 (`benchmark.measure.forward_macs`
  counts the same).

  `sync_batch_norm`: batch statistics over every replica's examples (Keras's
  `BatchNormalization(synchronized=True)`), so that the replica count does
  not change what a step computes.
  """
  count = iter(range(1000))

  def conv(x, filters, strides=1):
    index = next(count)
    return tf.keras.layers.Conv2D(
        filters, 3, strides, padding='same', use_bias=False,
        kernel_initializer=initializer(tf.keras.initializers.HeNormal, seed,
                                       index),
        name=f'conv{index}')(x)

  def batch_norm(x, index):
    return tf.keras.layers.BatchNormalization(
        momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
        synchronized=sync_batch_norm, name=f'bn{index}')(x)

  images = tf.keras.layers.Input(input_shape, name='image')
  x = tf.keras.layers.ReLU()(batch_norm(conv(images, 16), 0))
  for stage, filters in enumerate((16, 32, 64)):
    for block in range(3):
      strides = 2 if stage and not block else 1
      y = conv(x, filters, strides)
      y = tf.keras.layers.ReLU()(batch_norm(y, stage * 6 + block * 2 + 1))
      y = batch_norm(conv(y, filters), stage * 6 + block * 2 + 2)
      shortcut = x
      if strides != 1:
        shortcut = tf.keras.layers.Lambda(
            lambda t, width=filters: tf.pad(
                t[:, ::2, ::2, :],
                [[0, 0], [0, 0], [0, 0], [0, width - t.shape[-1]]]))(x)
      x = tf.keras.layers.ReLU()(tf.keras.layers.Add()([y, shortcut]))
  x = tf.keras.layers.GlobalAveragePooling2D()(x)
  logits = tf.keras.layers.Dense(
      num_classes, dtype='float32', name='logits',
      kernel_initializer=initializer(tf.keras.initializers.GlorotUniform,
                                     seed, next(count)))(x)
  return tf.keras.Model(images, logits, name='resnet20')


BUILTINS = {'cnn': cnn, 'resnet20': resnet20}
