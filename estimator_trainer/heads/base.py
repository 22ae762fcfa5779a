"""What every head has: the class names, the Keras loss and the outputs a
classifier exports; a head of another kind overrides what differs."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import metrics as metrics_lib

# TensorFlow Serving's methods of canned's classification and regression
# signatures (their outputs' keys: classes and scores; outputs).
CLASSIFY = tf.saved_model.CLASSIFY_METHOD_NAME
REGRESS = tf.saved_model.REGRESS_METHOD_NAME
# Estimator's export output of each (tf.estimator: TensorFlow 2.15 only).
_ESTIMATOR_OUTPUTS = {
    CLASSIFY: lambda classes, scores: tf.estimator.export.ClassificationOutput(
        scores=scores, classes=classes),
    REGRESS: lambda outputs: tf.estimator.export.RegressionOutput(
        value=outputs)}


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

  # {signature: method} of the Classify and Regress signatures the canned
  # head of this kind exports (the first is its serving_default), each on
  # one string input, `inputs`: TensorFlow Serving's and tfx-bsl's
  # RunInference's contract, which every engine's export keeps. None here:
  # the predict signature alone.
  serving_methods = {}

  def serving_outputs(self, predictions):
    """{signature of serving_methods: its outputs} of `predictions`."""
    del predictions
    return {}

  def export_outputs(self, predictions):
    """Estimator's export outputs, as the canned head of this kind names
    them (a SavedModel's signatures on serialized tf.Examples):
    serving_outputs, and `predict`."""
    outputs = {name: _ESTIMATOR_OUTPUTS[self.serving_methods[name]](
        **tensors) for name, tensors in self.serving_outputs(
            predictions).items()}
    predict = tf.estimator.export.PredictOutput(predictions)
    default = next(iter(outputs.values()), predict)
    return {'serving_default': default, **outputs, 'predict': predict}

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
    """Canned's classification signature: every class and its score."""
    batch = tf.shape(predictions['probabilities'])[0]
    return {'classification': {
        'classes': tf.tile(tf.constant(self.class_names)[None], [batch, 1]),
        'scores': predictions['probabilities']}}


class _KerasLoss(tf.keras.losses.Loss):
  def __init__(self, head):
    super().__init__(name=f'{head.kind}_loss')
    self._head = head

  def call(self, y_true, y_pred):
    return self._head.per_example_loss(self._head.keras_labels(y_true),
                                       y_pred)
