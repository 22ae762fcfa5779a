"""The eval metrics every engine reports, as Keras metrics: model_fn hands
them to Estimator (`eval_metric_ops`), the TF2 Evaluator updates them under
its strategy."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import summaries


class EvalMetrics:
  """accuracy, average_loss (exact per example) and num_examples, weighted
  (weight 0 marks padding); with `class_names`, the confusion matrix and the
  misclassified images (of `image_shape`) too, string-valued image
  summaries."""

  def __init__(self, class_names=None, image_shape=None):
    self.scalars = {
        'accuracy': tf.keras.metrics.Accuracy(name='accuracy'),
        'average_loss': tf.keras.metrics.Mean(name='average_loss'),
        'num_examples': tf.keras.metrics.Sum(name='num_examples'),
    }
    self.images = {}
    if class_names is not None:
      self.images = {
          'confusion_matrix': summaries.ConfusionMatrixImage(class_names),
          'misclassified': summaries.MisclassifiedImage(class_names,
                                                        image_shape),
      }

  def update(self, images, labels, logits, weights):
    """Adds a batch; returns every metric by name."""
    classes = tf.argmax(logits, axis=1)
    self.scalars['accuracy'].update_state(labels, classes,
                                          sample_weight=weights)
    self.scalars['average_loss'].update_state(
        losses.per_example_loss(labels, logits), sample_weight=weights)
    self.scalars['num_examples'].update_state(weights)
    if self.images:
      self.images['confusion_matrix'].update_state(labels, classes, weights)
      self.images['misclassified'].update_state(images, labels, classes,
                                                weights)
    return {**self.scalars, **self.images}

  def reset(self):
    for metric in [*self.scalars.values(), *self.images.values()]:
      metric.reset_state()
