"""The eval metrics every engine reports, as Keras metrics: model_fn hands
them to Estimator (`eval_metric_ops`), the TF2 Evaluator updates them under
its strategy."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import summaries


def _count_examples(metric, weights, padding):
  """num_examples: every row but the eval input's padding (`padding` True;
  None: none), whatever its weight (the weights weigh the examples, they
  do not make more or fewer of them)."""
  rows = tf.ones_like(weights) if padding is None else tf.cast(
      tf.logical_not(padding), weights.dtype)
  metric.update_state(rows)


class EvalMetrics:
  """accuracy, average_loss (exact per example), weighted (padding weighs
  0), and num_examples (every example); with `class_names`, the confusion
  matrix and the misclassified images (of `image_shape`) too,
  string-valued image summaries."""

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

  def update(self, images, labels, logits, weights, padding=None):
    """Adds a batch (`padding`: True on the eval input's padded rows);
    returns every metric by name."""
    classes = tf.argmax(logits, axis=1)
    self.scalars['accuracy'].update_state(labels, classes,
                                          sample_weight=weights)
    self.scalars['average_loss'].update_state(
        losses.per_example_loss(labels, logits), sample_weight=weights)
    _count_examples(self.scalars['num_examples'], weights, padding)
    if self.images:
      self.images['confusion_matrix'].update_state(labels, classes, weights)
      self.images['misclassified'].update_state(images, labels, classes,
                                                weights)
    return {**self.scalars, **self.images}

  def reset(self):
    for metric in [*self.scalars.values(), *self.images.values()]:
      metric.reset_state()


class HeadMetrics:
  """What canned Estimator heads report for `head` (heads/), weighted
  (padding weighs 0): average_loss, num_examples (every example, of any
  weight), and per kind multiclass: accuracy (and the confusion matrix
  image); binary: accuracy, auc, auc_precision_recall, precision, recall,
  label/mean, prediction/mean; regression: mean_absolute_error,
  root_mean_squared_error, label/mean, prediction/mean; multilabel: auc
  (canned MultiLabelHead's: of every label's probabilities pooled) and
  auc/<label> per label. `images`: the confusion matrix image of a
  multiclass head."""

  def __init__(self, head, images=True):
    self._head = head
    kind = head.kind
    scalars = {'average_loss': tf.keras.metrics.Mean(name='average_loss'),
               'num_examples': tf.keras.metrics.Sum(name='num_examples')}
    if kind in ('multiclass', 'binary'):
      scalars['accuracy'] = tf.keras.metrics.Accuracy(name='accuracy')
    if kind == 'binary':
      scalars.update({
          'auc': tf.keras.metrics.AUC(name='auc'),
          'auc_precision_recall': tf.keras.metrics.AUC(
              curve='PR', name='auc_precision_recall'),
          'precision': tf.keras.metrics.Precision(name='precision'),
          'recall': tf.keras.metrics.Recall(name='recall')})
    if kind == 'regression':
      scalars.update({
          'mean_absolute_error': tf.keras.metrics.MeanAbsoluteError(
              name='mean_absolute_error'),
          'root_mean_squared_error': tf.keras.metrics.RootMeanSquaredError(
              name='root_mean_squared_error')})
    if kind in ('binary', 'regression'):
      # Keras names its variables' scope after the metric: no '/' there.
      scalars['label/mean'] = tf.keras.metrics.Mean(name='label_mean')
      scalars['prediction/mean'] = tf.keras.metrics.Mean(
          name='prediction_mean')
    if kind == 'multilabel':
      scalars['auc'] = tf.keras.metrics.AUC(name='auc')
      for index, label in enumerate(head.class_names):
        scalars[f'auc/{label}'] = tf.keras.metrics.AUC(name=f'auc_{index}')
    self.scalars = scalars
    self.images = {}
    if kind == 'multiclass' and images:
      self.images['confusion_matrix'] = summaries.ConfusionMatrixImage(
          head.class_names)

  def update(self, inputs, labels, logits, weights, padding=None):
    """Adds a batch (`inputs`: the model's, unused; `padding`: True on the
    eval input's padded rows); returns every metric by name."""
    del inputs
    head, scalars = self._head, self.scalars
    scalars['average_loss'].update_state(head.eval_loss(labels, logits),
                                         sample_weight=weights)
    _count_examples(scalars['num_examples'], weights, padding)
    if head.kind in ('multiclass', 'binary'):
      class_ids = head.class_ids(logits)
      scalars['accuracy'].update_state(labels, class_ids,
                                       sample_weight=weights)
    if 'confusion_matrix' in self.images:
      self.images['confusion_matrix'].update_state(labels, class_ids,
                                                   weights)
    if head.kind in ('binary', 'regression'):
      # What prediction/mean averages: the probability of class 1, or the
      # predicted value.
      prediction = (tf.sigmoid(logits[:, 0]) if head.kind == 'binary' else
                    head.values(logits)[:, 0])
    if head.kind == 'binary':
      for name in ('auc', 'auc_precision_recall', 'precision', 'recall'):
        scalars[name].update_state(labels, prediction,
                                   sample_weight=weights)
    if head.kind == 'regression':
      for name in ('mean_absolute_error', 'root_mean_squared_error'):
        # [batch, 1] both: Keras's errors reduce over the last axis.
        scalars[name].update_state(tf.cast(labels, tf.float32)[:, None],
                                   head.values(logits), sample_weight=weights)
    if head.kind in ('binary', 'regression'):
      scalars['label/mean'].update_state(tf.cast(labels, tf.float32),
                                         sample_weight=weights)
      scalars['prediction/mean'].update_state(prediction,
                                              sample_weight=weights)
    if head.kind == 'multilabel':
      probabilities = tf.sigmoid(logits)
      # As canned: one AUC of every (example, label) pair, the example's
      # weight broadcast over its labels.
      scalars['auc'].update_state(labels, probabilities,
                                  sample_weight=weights[:, None])
      for index, label in enumerate(head.class_names):
        scalars[f'auc/{label}'].update_state(
            labels[:, index], probabilities[:, index], sample_weight=weights)
    return {**scalars, **self.images}

  def reset(self):
    for metric in [*self.scalars.values(), *self.images.values()]:
      metric.reset_state()
