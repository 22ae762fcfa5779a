"""The benchmark's splits of its real tables (benchmark/real_tables.py):
another seed draws other evaluation rows of the same table, and the
default is the seed the published figures were measured at."""

import numpy as np
import pytest

from estimator_trainer.benchmark import real_tables

# The tables come as DataFrames; the TensorFlow 2.21 stack has no pandas.
pd = pytest.importorskip('pandas')


def test_a_split_seed_draws_another_partition_of_the_same_rows():
  table = real_tables.frame('wine')
  default = real_tables.split('wine')
  assert all(a.equals(b) for a, b in
             zip(default, real_tables.split('wine', real_tables.SEED)))
  train, test = real_tables.split('wine', seed=1)
  assert (len(train), len(test)) == tuple(len(part) for part in default)
  assert not test.equals(default[1])
  rows = lambda frame: sorted(map(tuple, frame.astype(str).values.tolist()))
  assert rows(pd.concat([train, test])) == rows(table)


def _lines(order, logits, classes=None, predictions=None):
  """--mode=predict's lines of the CSV rows `order` (0 = the first row),
  in that order."""
  lines = []
  for index, row in enumerate(order):
    line = {'index': index, 'file': 'eval.csv', 'line': row + 2}
    if classes is None:
      line['predictions'] = [predictions[row]]
    else:
      line.update(all_classes=classes, logits=logits[row])
    lines.append(line)
  return lines


def test_predictions_are_scored_by_their_rows_and_class_names(tmp_path):
  """The benchmark scores a run as it scores the baselines (scikit-learn
  on the evaluation rows): each line by the CSV row it names, each label
  by its class name's place in the run's vocabulary, probabilities from
  the logits (a confident miss costs its loss, not the clip of a rounded
  0)."""
  from sklearn import metrics
  test = tmp_path / 'eval.csv'
  pd.DataFrame({'x': [1, 2, 3, 4, 5], 'y': ['Yes', 'No', 'No', 'Yes', 'No'],
                'k': ['b', 'c', 'a', 'b', 'a'],
                'r': [1.5, 2.0, -1.0, 0.25, 3.0]}).to_csv(test, index=False)
  order = [4, 2, 0, 3, 1]
  logits = [[0.3], [-0.2], [0.1], [25.0], [-30.0]]  # Rows 3, 4: confident.
  score, log_loss = real_tables.score_predictions(
      'y', 'binary', test, _lines(order, logits, ['No', 'Yes']))
  truth = np.array([1, 0, 0, 1, 0])
  p = 1 / (1 + np.exp(-np.array(logits)[:, 0]))
  assert score == pytest.approx(metrics.roc_auc_score(truth, p))
  assert log_loss == pytest.approx(metrics.log_loss(truth, p))
  # Row 1 ("No") at logit 25 would be a miss: its loss 25, not 34.5.
  wrong = _lines(order, [[0.3], [25.0], [0.1], [2.0], [-3.0]], ['No', 'Yes'])
  assert real_tables.score_predictions('y', 'binary', test, wrong)[1] == (
      pytest.approx((25 + np.logaddexp(0, -0.3) + np.logaddexp(0, 0.1) +
                     np.logaddexp(0, -2.0) + np.logaddexp(0, -3.0)) / 5,
                    rel=1e-6))

  # The vocabulary's order, not the names' sorted one.
  # By row: b, c, a, b right; the last row's a taken for b.
  logits = [[2.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 2.0, 0.0],
            [2.0, 0.0, 0.0], [3.0, 0.0, 0.0]]
  accuracy, log_loss = real_tables.score_predictions(
      'k', 'multiclass', test, _lines(order, logits, ['b', 'a', 'c']))
  assert accuracy == pytest.approx(0.8)
  shifted = np.array(logits) - np.max(logits, axis=1, keepdims=True)
  probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1,
                                                        keepdims=True)
  assert log_loss == pytest.approx(metrics.log_loss(
      [0, 2, 1, 0, 1], probabilities, labels=[0, 1, 2]))

  predictions = [1.0, 2.0, 0.0, 0.25, 1.0]
  rmse, none = real_tables.score_predictions(
      'r', 'regression', test, _lines(order, None, predictions=predictions))
  assert none is None
  assert rmse == pytest.approx(np.sqrt(np.mean(
      (np.array(predictions) - [1.5, 2.0, -1.0, 0.25, 3.0]) ** 2)))
  with pytest.raises(ValueError, match='4 predictions of 5 rows'):
    real_tables.score_predictions('r', 'regression', test, _lines(
        order[:4], None, predictions=predictions))
