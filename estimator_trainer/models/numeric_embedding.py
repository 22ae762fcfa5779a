"""Periodic embeddings of the deep part's numbers (issue 72, item 3;
`dnn`'s and `wide_deep`'s `numeric_embedding` kwarg, off in the builders,
on for a new structured run: model_recipe.py): Gorishniy et al.
2022's PLR, close to RealMLP's PBLD (Holzmueller et al., 2024). Each
standardized number x enters the hidden layers as
[x, relu(W (cos 2 pi f x, sin 2 pi f x) + b)], `frequencies` trainable f per
number from N(0, sigma^2) and a Dense of `units` per number.

One layer over all the numbers at once (a batched einsum): a layer per
number took caravan's 85 columns 243 s a run against 29 s."""

import math

import tensorflow as tf

from estimator_trainer.errors import UsageError

DEFAULTS = {'frequencies': 8, 'sigma': 0.1, 'units': 8}


def settings(value):
  """The kwarg's {frequencies, sigma, units} (`true`: DEFAULTS; an object
  overrides them), or None for null/false; bad values a UsageError."""
  if value is None or value is False:
    return None
  if value is True:
    return dict(DEFAULTS)
  if not isinstance(value, dict) or not set(value) <= set(DEFAULTS):
    raise UsageError('--model_kwargs: numeric_embedding must be true, false '
                     'or an object of frequencies, sigma and units, got '
                     f'{value!r}')
  value = {**DEFAULTS, **value}
  for key in ('frequencies', 'units'):
    if (isinstance(value[key], bool) or not isinstance(value[key], int) or
        value[key] < 1):
      raise UsageError(f'--model_kwargs: numeric_embedding {key} must be a '
                       f'positive integer, got {value[key]!r}')
  sigma = value['sigma']
  if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (
      sigma > 0):
    raise UsageError('--model_kwargs: numeric_embedding sigma must be a '
                     f'positive number, got {sigma!r}')
  return value


@tf.keras.utils.register_keras_serializable(package='estimator_trainer')
class NumericEmbedding(tf.keras.layers.Layer):
  """[batch, n] -> [batch, n + n * units]: the numbers, then each number's
  embedding (number-major). Variables `frequencies` [n, frequencies] (not
  under --weight_decay: models/load.py decays kernels), `kernel`
  [n, 2 * frequencies, units] (cos rows, then sin rows) and `bias`
  [n, units]."""

  def __init__(self, frequencies, sigma, units, seeds=(None, None),
               **kwargs):
    super().__init__(**kwargs)
    self.frequencies, self.sigma, self.units = frequencies, sigma, units
    self.seeds = tuple(seeds)

  def build(self, input_shape):
    width = int(input_shape[-1])
    self.frequency = self.add_weight(
        name='frequencies', shape=[width, self.frequencies],
        initializer=tf.keras.initializers.RandomNormal(
            stddev=self.sigma, seed=self.seeds[0]))
    # Glorot-uniform of each number's own Dense (fan in 2 x frequencies,
    # out units): Keras's GlorotUniform would count all n numbers' fans.
    limit = math.sqrt(6 / (2 * self.frequencies + self.units))
    self.kernel = self.add_weight(
        name='kernel', shape=[width, 2 * self.frequencies, self.units],
        initializer=tf.keras.initializers.RandomUniform(
            -limit, limit, seed=self.seeds[1]))
    self.bias = self.add_weight(name='bias', shape=[width, self.units],
                                initializer='zeros')
    super().build(input_shape)

  def call(self, inputs):
    angles = 2 * math.pi * inputs[:, :, None] * tf.cast(
        self.frequency, inputs.dtype)[None]
    periodic = tf.concat([tf.cos(angles), tf.sin(angles)], -1)
    embedded = tf.nn.relu(tf.einsum(
        'bnk,nku->bnu', periodic, tf.cast(self.kernel, inputs.dtype)) +
                          tf.cast(self.bias, inputs.dtype))
    return tf.concat([inputs, tf.reshape(
        embedded, [-1, inputs.shape[-1] * self.units])], -1)

  def get_config(self):
    return {**super().get_config(), 'frequencies': self.frequencies,
            'sigma': self.sigma, 'units': self.units, 'seeds': self.seeds}
