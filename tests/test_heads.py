"""Heads: losses, weights, metrics and predictions against numpy and
scikit-learn, computed independently of TensorFlow."""

import numpy as np
import pytest
from sklearn import metrics as sk_metrics
import tensorflow as tf

from estimator_trainer import heads

RNG = np.random.default_rng(0)
BATCH = 64
WEIGHTS = RNG.uniform(0.0, 2.0, BATCH).astype(np.float32)
WEIGHTS[:5] = 0.0  # Examples of weight 0 (a weight column's).


def _sigmoid(x):
  return 1 / (1 + np.exp(-x))


def _evaluate(head, labels, logits, weights=WEIGHTS, padding=None):
  metrics = head.eval_metrics()
  metrics.update(None, tf.constant(labels), tf.constant(logits),
                 tf.constant(weights), padding)
  return {name: float(metric.result())
          for name, metric in metrics.scalars.items()}


def test_binary_loss_metrics_and_predictions():
  head = heads.make('binary', ('no', 'yes'))
  labels = RNG.integers(0, 2, BATCH)
  logits = RNG.normal(0, 2, (BATCH, 1)).astype(np.float32)
  p = _sigmoid(logits[:, 0])
  expected_loss = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
  np.testing.assert_allclose(head.per_example_loss(labels, logits),
                             expected_loss, rtol=1e-5)
  result = _evaluate(head, labels, logits)
  w = WEIGHTS
  predicted = (p > 0.5).astype(int)
  assert result['accuracy'] == pytest.approx(
      sk_metrics.accuracy_score(labels, predicted, sample_weight=w), abs=1e-6)
  # Keras's AUC interpolates over 200 thresholds: close to the exact one.
  assert result['auc'] == pytest.approx(
      sk_metrics.roc_auc_score(labels, p, sample_weight=w), abs=0.01)
  assert result['precision'] == pytest.approx(
      sk_metrics.precision_score(labels, predicted, sample_weight=w),
      abs=1e-5)
  assert result['recall'] == pytest.approx(
      sk_metrics.recall_score(labels, predicted, sample_weight=w), abs=1e-5)
  assert result['label/mean'] == pytest.approx(np.average(labels, weights=w),
                                               abs=1e-5)
  assert result['prediction/mean'] == pytest.approx(
      np.average(p, weights=w), abs=1e-5)
  assert result['average_loss'] == pytest.approx(
      np.average(expected_loss, weights=w), rel=1e-5)
  assert result['num_examples'] == BATCH
  predictions = {k: np.asarray(v) for k, v in head.predictions(
      tf.constant(logits)).items()}
  assert set(predictions) == {'logits', 'logistic', 'probabilities',
                              'class_ids', 'classes', 'all_class_ids',
                              'all_classes'}
  np.testing.assert_array_equal(predictions['class_ids'][:, 0], predicted)
  assert [c.decode() for c in predictions['classes'][:3, 0]] == [
      ('no', 'yes')[i] for i in predicted[:3]]
  np.testing.assert_allclose(predictions['probabilities'].sum(1), 1,
                             rtol=1e-6)


def test_multiclass_loss_with_label_smoothing_and_metrics():
  head = heads.make('multiclass', ('a', 'b', 'c'), label_smoothing=0.1)
  labels = RNG.integers(0, 3, BATCH)
  logits = RNG.normal(0, 2, (BATCH, 3)).astype(np.float32)
  log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  targets = np.full((BATCH, 3), 0.1 / 3)
  targets[np.arange(BATCH), labels] += 0.9
  np.testing.assert_allclose(head.per_example_loss(labels, logits),
                             -(targets * log_p).sum(1), rtol=1e-5)
  result = _evaluate(head, labels, logits)
  # Evaluation reports the plain cross-entropy.
  assert result['average_loss'] == pytest.approx(np.average(
      -log_p[np.arange(BATCH), labels], weights=WEIGHTS), rel=1e-5)
  assert result['accuracy'] == pytest.approx(sk_metrics.accuracy_score(
      labels, logits.argmax(1), sample_weight=WEIGHTS), abs=1e-6)


@pytest.mark.parametrize('huber_delta', [None, 1.5])
@pytest.mark.parametrize('label_scale', [None, (150.0, 77.0)])
def test_regression_loss_and_metrics(huber_delta, label_scale):
  """With a label scale (issue 45: a diabetes model's outputs took 10
  epochs to grow from 0 towards labels of mean 150, RMSE 161 against
  Ridge's 57), the values are logits * stddev + mean, in the loss, the
  metrics and the predictions alike."""
  head = heads.make('regression', huber_delta=huber_delta,
                    label_scale=label_scale)
  mean, stddev = label_scale or (0.0, 1.0)
  labels = RNG.normal(mean, 3 * stddev, BATCH).astype(np.float32)
  logits = RNG.normal(0, 3, (BATCH, 1)).astype(np.float32)
  values = logits * stddev + mean
  np.testing.assert_allclose(head.predictions(logits)['predictions'], values,
                             rtol=1e-6)
  error = np.abs(labels - values[:, 0])
  expected_loss = (error**2 if huber_delta is None else np.where(
      error <= huber_delta, 0.5 * error**2,
      huber_delta * (error - 0.5 * huber_delta)))
  np.testing.assert_allclose(head.per_example_loss(labels, logits),
                             expected_loss, rtol=1e-5)
  result = _evaluate(head, labels, logits)
  assert result['mean_absolute_error'] == pytest.approx(
      np.average(error, weights=WEIGHTS), rel=1e-5)
  assert result['root_mean_squared_error'] == pytest.approx(
      np.sqrt(np.average(error**2, weights=WEIGHTS)), rel=1e-5)
  assert result['prediction/mean'] == pytest.approx(
      np.average(values[:, 0], weights=WEIGHTS), rel=1e-5)
  assert set(head.predictions(logits)) == {'predictions'}


def test_multilabel_loss_and_aucs():
  names = ('x', 'y', 'z')
  head = heads.make('multilabel', names)
  # Its own generator: the case must not depend on the tests before it.
  rng = np.random.default_rng(45)
  labels = rng.integers(0, 2, (BATCH, 3)).astype(np.float32)
  # Each label's logits rank its examples well, around an offset of its
  # own: every per-label AUC is high, the pooled one (positives of one
  # label below negatives of another) lower.
  logits = (3 * labels + rng.normal(0, 1, (BATCH, 3)) +
            np.array([-2.5, 0.0, 2.5])).astype(np.float32)
  p = _sigmoid(logits)
  expected_loss = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)).mean(1)
  np.testing.assert_allclose(head.per_example_loss(labels, logits),
                             expected_loss, rtol=1e-5)
  result = _evaluate(head, labels, logits)
  per_label = [sk_metrics.roc_auc_score(labels[:, i], p[:, i],
                                        sample_weight=WEIGHTS)
               for i in range(3)]
  for name, auc in zip(names, per_label):
    assert result[f'auc/{name}'] == pytest.approx(auc, abs=0.01)
  # canned MultiLabelHead's auc: one AUC of the labels and probabilities
  # flattened, each example's weight on each of its labels.
  pooled = sk_metrics.roc_auc_score(labels.ravel(), p.ravel(),
                                    sample_weight=np.repeat(WEIGHTS, 3))
  assert abs(pooled - np.mean(per_label)) > 0.05  # The case tells them apart.
  # Keras's AUC interpolates over 200 thresholds: close to the exact one.
  assert result['auc'] == pytest.approx(pooled, abs=0.01)


def _head_and_batch(kind):
  """A head of `kind` and a batch of its labels and logits."""
  head = heads.make(kind, ('a', 'b', 'c') if kind in (
      'multiclass', 'multilabel') else ())
  width = head.logits_dimension
  logits = RNG.normal(0, 1, (BATCH, width)).astype(np.float32)
  labels = (RNG.integers(0, 2, (BATCH, width)).astype(np.float32)
            if kind == 'multilabel' else
            RNG.normal(0, 1, BATCH).astype(np.float32)
            if kind == 'regression' else RNG.integers(0, max(width, 2),
                                                       BATCH))
  return head, labels, logits


@pytest.mark.parametrize('images', [True, False])
@pytest.mark.parametrize('kind', heads.KINDS)
def test_eval_metrics_of_every_head_with_and_without_images(kind, images):
  """Every head's metrics build, update and give results (TFX's EVAL graph
  has no images: a multiclass head's raised KeyError 'confusion_matrix');
  num_examples counts every example, weight 0 too, and no padding."""
  head, labels, logits = _head_and_batch(kind)
  padding = np.arange(BATCH) >= BATCH - 3
  weights = np.where(padding, 0.0, WEIGHTS).astype(np.float32)
  metrics = head.eval_metrics(images)
  every = metrics.update(None, tf.constant(labels), tf.constant(logits),
                         tf.constant(weights), tf.constant(padding))
  assert ('confusion_matrix' in every) == (kind == 'multiclass' and images)
  result = {name: metric.result().numpy() for name, metric in every.items()}
  assert result['num_examples'] == BATCH - 3
  assert all(np.isfinite(result[name]).all() for name in metrics.scalars)


@pytest.mark.parametrize('kind', heads.KINDS)
def test_weights_enter_the_sum_and_the_divisor_stays_the_batch(kind):
  """sum(weight x loss) / global batch, as canned SUM_OVER_BATCH_SIZE."""
  head, labels, logits = _head_and_batch(kind)
  per_example = head.per_example_loss(labels, logits).numpy()
  loss = head.replica_training_loss(labels, logits, 4 * BATCH,
                                    weights=WEIGHTS)
  assert float(loss) == pytest.approx(
      (WEIGHTS * per_example).sum() / (4 * BATCH), rel=1e-5)
