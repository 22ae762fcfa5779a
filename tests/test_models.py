"""Model builders: the CNN and ResNet-20, the user's, and their checks."""

import tensorflow as tf

from estimator_trainer import config_checks
from estimator_trainer import models


def test_mixed_bfloat16_computes_in_bfloat16_with_float32_variables():
  float32 = models.build('cnn', (28, 28, 1), 10, seed=1)
  mixed = models.build('cnn', (28, 28, 1), 10, seed=1,
                       precision='mixed_bfloat16')
  assert [w.name for w in mixed.weights] == [w.name for w in float32.weights]
  assert {w.dtype for w in mixed.weights} == {tf.float32}
  assert mixed.get_layer('conv1').compute_dtype == 'bfloat16'
  assert mixed.get_layer('logits').compute_dtype == 'float32'
  images = tf.random.stateless_uniform([8, 28, 28, 1], seed=[1, 2])
  logits = mixed(images)
  assert logits.dtype == tf.float32
  # Same weights, so close logits: bfloat16 keeps about 3 significant digits.
  reference = float32(images)
  assert float(tf.reduce_max(tf.abs(logits - reference))) < 0.05 * float(
      tf.reduce_max(tf.abs(reference)))


def test_the_configs_model_names_are_the_builtins():
  """config_checks refuses an unknown name before any data is read, from
  its own list (the CLI checks flags before TensorFlow loads)."""
  assert config_checks.MODEL_NAMES == models.BUILTIN_NAMES
