"""The regression head: one value, squared error or Huber loss; the logits
rescaled by the training labels' mean and deviation when given."""

import tensorflow as tf

from estimator_trainer.heads import base
from estimator_trainer.heads.base import Head


class RegressionHead(Head):
  """Squared error of one value (Huber loss with `huber_delta`); labels
  float32 [batch]. With `label_scale` (the training labels' mean and
  standard deviation) the value predicted is logits * stddev + mean: a
  model's outputs start near the labels whatever their units (a weight in
  grams, a price in dollars), as a linear regression's intercept and
  coefficients do, where Adam's steps of about its learning rate would take
  thousands of steps to reach them. The loss, the metrics and the
  predictions are in the label's units."""

  kind = 'regression'

  def __init__(self, huber_delta=None, label_scale=None):
    super().__init__(())
    self.huber_delta = huber_delta
    self.label_scale = tuple(label_scale) if label_scale else None

  @property
  def logits_dimension(self):
    return 1

  def values(self, logits):
    """The predicted values [batch, 1] of the logits."""
    if self.label_scale is None:
      return logits
    mean, stddev = self.label_scale
    return logits * stddev + mean

  def per_example_loss(self, labels, logits):
    error = tf.cast(labels, logits.dtype) - self.values(logits)[:, 0]
    if self.huber_delta is None:
      return tf.square(error)
    absolute = tf.abs(error)
    quadratic = tf.minimum(absolute, self.huber_delta)
    return 0.5 * tf.square(quadratic) + self.huber_delta * (
        absolute - quadratic)

  def keras_labels(self, y_true):
    return tf.reshape(tf.cast(y_true, tf.float32), [-1])

  @property
  def label_spec(self):
    return tf.TensorSpec([None], tf.float32)

  def predictions(self, logits):
    return {'predictions': self.values(logits)}

  serving_methods = {'regression': base.REGRESS}

  def serving_outputs(self, predictions):
    return {'regression': {'outputs': predictions['predictions']}}
