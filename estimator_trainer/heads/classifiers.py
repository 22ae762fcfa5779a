"""The classification heads: multiclass (softmax; the image classifiers'),
binary (sigmoid) and multilabel (a sigmoid per label)."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import metrics as metrics_lib
from estimator_trainer.heads import base
from estimator_trainer.heads.base import Head


class MulticlassHead(Head):
  """Softmax cross-entropy over `class_names`, with label smoothing in
  training; labels are class ids (int64 [batch])."""

  kind = 'multiclass'
  has_accuracy = True

  def __init__(self, class_names, label_smoothing=0.0):
    super().__init__(class_names)
    self.label_smoothing = label_smoothing

  def per_example_loss(self, labels, logits):
    return losses.per_example_loss(labels, logits, self.label_smoothing)

  def eval_loss(self, labels, logits):
    return losses.per_example_loss(labels, logits)

  def keras_labels(self, y_true):
    return tf.reshape(tf.cast(y_true, tf.int64), [-1])

  def correct(self, labels, logits):
    return tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.float32)

  def keras_metrics(self):
    return [tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy')]

  def class_ids(self, logits):
    return tf.argmax(logits, axis=1)

  def predictions(self, logits):
    class_ids = self.class_ids(logits)[:, None]
    return {'logits': logits, 'probabilities': tf.nn.softmax(logits),
            'class_ids': class_ids, 'classes': self._class_strings(class_ids),
            **self._all_classes(logits)}

  serving_methods = {'classification': base.CLASSIFY}

  def serving_outputs(self, predictions):
    return self._classification_outputs(predictions)


class ImageClassifierHead(MulticlassHead):
  """The image classifiers' head: predictions under this package's names
  since 0.1.0 (`classes` int64, `probabilities`, `logits`), which their
  serving clients read; a PredictOutput as `serving_default`. With
  `image_shape`, evaluation draws the confusion matrix and misclassified
  images (not in graphs saved for another process: TFMA's)."""

  def __init__(self, class_names, label_smoothing=0.0, image_shape=None):
    super().__init__(class_names, label_smoothing)
    self.image_shape = image_shape

  def eval_metrics(self, images=True):
    images = images and self.image_shape
    return metrics_lib.EvalMetrics(self.class_names if images else None,
                                   self.image_shape)

  def predictions(self, logits):
    return {'classes': tf.argmax(logits, axis=1),
            'probabilities': tf.nn.softmax(logits),
            'logits': logits}

  serving_methods = {}  # Its input is an image batch, not tf.Examples.

  def export_outputs(self, predictions):
    return {'serving_default':
            tf.estimator.export.PredictOutput(predictions)}


class BinaryHead(Head):
  """Sigmoid cross-entropy of one logit; labels 0 or 1 (int64 [batch]);
  `class_names` of class 0 and class 1."""

  kind = 'binary'
  has_accuracy = True

  def __init__(self, class_names=('0', '1')):
    super().__init__(class_names)

  @property
  def logits_dimension(self):
    return 1

  def per_example_loss(self, labels, logits):
    return tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels, logits.dtype), logits=logits[:, 0])

  def keras_labels(self, y_true):
    return tf.reshape(tf.cast(y_true, tf.int64), [-1])

  def class_ids(self, logits):
    return tf.cast(logits[:, 0] > 0, tf.int64)

  def correct(self, labels, logits):
    return tf.cast(tf.equal(self.class_ids(logits), labels), tf.float32)

  def keras_metrics(self):
    return [_BinaryAccuracy(name='accuracy')]

  def predictions(self, logits):
    logistic = tf.sigmoid(logits)
    class_ids = self.class_ids(logits)[:, None]
    return {'logits': logits, 'logistic': logistic,
            'probabilities': tf.concat([1 - logistic, logistic], axis=1),
            'class_ids': class_ids, 'classes': self._class_strings(class_ids),
            **self._all_classes(logits)}

  serving_methods = {'classification': base.CLASSIFY,
                     'regression': base.REGRESS}

  def serving_outputs(self, predictions):
    return {**self._classification_outputs(predictions),
            'regression': {'outputs': predictions['logistic']}}


class _BinaryAccuracy(tf.keras.metrics.BinaryAccuracy):
  """Keras's binary accuracy of one logit: positive above 0."""

  def __init__(self, name):
    super().__init__(name=name, threshold=0.0)

  def update_state(self, y_true, y_pred, sample_weight=None):
    return super().update_state(tf.reshape(y_true, [-1, 1]), y_pred,
                                sample_weight)


class MultilabelHead(Head):
  """Sigmoid cross-entropy per label, averaged over the labels (canned
  multi_label_head); labels float32 [batch, len(class_names)] of 0 and 1,
  `class_names` the labels' names."""

  kind = 'multilabel'

  def per_example_loss(self, labels, logits):
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels, logits.dtype), logits=logits), axis=-1)

  def keras_labels(self, y_true):
    return tf.reshape(tf.cast(y_true, tf.float32),
                      [-1, len(self.class_names)])

  @property
  def label_spec(self):
    return tf.TensorSpec([None, len(self.class_names)], tf.float32)

  def predictions(self, logits):
    return {'logits': logits, 'probabilities': tf.sigmoid(logits)}

  serving_methods = {'classification': base.CLASSIFY}

  def serving_outputs(self, predictions):
    return self._classification_outputs(predictions)
