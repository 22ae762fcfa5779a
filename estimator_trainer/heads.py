"""Heads: what a model's logits mean. A head owns the per-example loss, the
training and evaluation metrics, the predictions and the export outputs,
as canned Estimators' heads do (tensorflow_estimator's head/*.py), under
their names; every engine asks the head.

The loss scaling stays in losses.py: each replica sums its examples' weighted
losses and divides by the global batch (canned heads' SUM_OVER_BATCH_SIZE).
"""

import tensorflow as tf

from estimator_trainer import config_checks
from estimator_trainer import config_resolved
from estimator_trainer import losses
from estimator_trainer import metrics as metrics_lib

KINDS = config_checks.HEADS


class Head:
  """The common part: `class_names` (classes, or multilabel's labels)."""

  kind = None
  has_accuracy = False  # `correct` gives a training accuracy.

  def __init__(self, class_names=()):
    self.class_names = tuple(class_names)

  @property
  def logits_dimension(self):
    return len(self.class_names)

  @property
  def label_spec(self):
    """The labels' tf.TensorSpec: class ids (int64), else float32."""
    return tf.TensorSpec([None], tf.int64)

  def per_example_loss(self, labels, logits):
    """The training objective per example (no reduction)."""
    raise NotImplementedError

  def eval_loss(self, labels, logits):
    """The loss evaluation reports per example (`average_loss`)."""
    return self.per_example_loss(labels, logits)

  def replica_training_loss(self, labels, logits, global_batch_size,
                            regularization_losses=(), weights=None):
    """This replica's share of the global batch's weighted mean loss."""
    return losses.scaled_to_global_batch(
        self.per_example_loss(labels, logits), global_batch_size,
        regularization_losses, weights)

  def correct(self, labels, logits):
    """Per example 1.0 if right, else 0.0 (the training accuracy summary)
    where `has_accuracy`."""
    raise NotImplementedError

  def predictions(self, logits):
    raise NotImplementedError

  def eval_metrics(self, images=True):
    """A metrics.HeadMetrics for this head; `images`: with image summaries
    (rendered in Python, so not in graphs saved for another process:
    TFMA's)."""
    return metrics_lib.HeadMetrics(self, images)

  def keras_loss(self):
    """per_example_loss as a Keras loss (fit sums it per replica and divides
    by the global batch)."""
    return _KerasLoss(self)

  def keras_metrics(self):
    """fit's training metrics: the accuracy summary where there is one."""
    return []

  def export_outputs(self, predictions):
    """Estimator's export outputs, as the canned head of this kind names
    them (a SavedModel's signatures on serialized tf.Examples)."""
    predict = tf.estimator.export.PredictOutput(predictions)
    return {'serving_default': predict, 'predict': predict}

  def _class_strings(self, class_ids):
    return tf.gather(tf.constant(self.class_names), class_ids)

  def _all_classes(self, logits):
    batch = tf.shape(logits)[0]
    # int32, as canned's base_head.all_class_ids (class_ids are int64).
    ids = tf.range(len(self.class_names), dtype=tf.int32)
    return {'all_class_ids': tf.tile(ids[None], [batch, 1]),
            'all_classes': tf.tile(tf.constant(self.class_names)[None],
                                   [batch, 1])}

  def _classification_outputs(self, predictions):
    batch = tf.shape(predictions['probabilities'])[0]
    classify = tf.estimator.export.ClassificationOutput(
        scores=predictions['probabilities'],
        classes=tf.tile(tf.constant(self.class_names)[None], [batch, 1]))
    return {'serving_default': classify, 'classification': classify,
            'predict': tf.estimator.export.PredictOutput(predictions)}


class _KerasLoss(tf.keras.losses.Loss):
  def __init__(self, head):
    super().__init__(name=f'{head.kind}_loss')
    self._head = head

  def call(self, y_true, y_pred):
    return self._head.per_example_loss(self._head.keras_labels(y_true),
                                       y_pred)


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

  def export_outputs(self, predictions):
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

  def export_outputs(self, predictions):
    outputs = self._classification_outputs(predictions)
    outputs['regression'] = tf.estimator.export.RegressionOutput(
        value=predictions['logistic'])
    return outputs


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

  def export_outputs(self, predictions):
    return self._classification_outputs(predictions)


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

  def export_outputs(self, predictions):
    regress = tf.estimator.export.RegressionOutput(
        value=predictions['predictions'])
    return {'serving_default': regress, 'regression': regress,
            'predict': tf.estimator.export.PredictOutput(predictions)}


def of_data(spec, kind=None, label_smoothing=None, huber_delta=None,
            image_summaries=False):
  """The head of data of `spec` (an image DatasetSpec, or tabular data's:
  its `head`, unless `kind` says otherwise), with `label_smoothing` if given
  (else config_resolved.label_smoothing_of's); `image_summaries`: images' evaluation
  draws them."""
  label_smoothing = config_resolved.label_smoothing_of(label_smoothing,
                                              images=not spec.head)
  if not spec.head:
    return ImageClassifierHead(spec.class_names, label_smoothing,
                               spec.model_input if image_summaries else None)
  return make(kind or spec.head, spec.class_names, label_smoothing,
              huber_delta, getattr(spec, 'label_scale', None))


def make(kind, class_names=(), label_smoothing=0.0, huber_delta=None,
         label_scale=None):
  """The head of `kind` (one of KINDS) for data of `class_names`;
  `label_scale`: a regression's (see RegressionHead)."""
  if kind == 'multiclass':
    return MulticlassHead(class_names, label_smoothing)
  if kind == 'binary':
    return BinaryHead(class_names or ('0', '1'))
  if kind == 'multilabel':
    return MultilabelHead(class_names)
  if kind == 'regression':
    return RegressionHead(huber_delta, label_scale)
  raise ValueError(f'head must be one of {", ".join(KINDS)}; got {kind!r}')
