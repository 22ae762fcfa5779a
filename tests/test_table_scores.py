"""How the benchmark scores a model (benchmark/table_scores.py): a run's
--mode=predict lines as the baselines' predictions are scored, and the
interval of two models' difference over resamples of the rows."""

import numpy as np
import pytest

from estimator_trainer.benchmark import table_scores

# The benchmark's scorer is scikit-learn's; the TensorFlow 2.21 stack has
# neither it nor pandas.
pd = pytest.importorskip('pandas')
metrics = pytest.importorskip('sklearn.metrics')


def _score(label, head, test, lines):
  rows = table_scores.of_predictions(label, head, test, lines)
  return rows.score(), rows.log_loss()


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
  test = tmp_path / 'eval.csv'
  pd.DataFrame({'x': [1, 2, 3, 4, 5], 'y': ['Yes', 'No', 'No', 'Yes', 'No'],
                'k': ['b', 'c', 'a', 'b', 'a'],
                'r': [1.5, 2.0, -1.0, 0.25, 3.0]}).to_csv(test, index=False)
  order = [4, 2, 0, 3, 1]
  logits = [[0.3], [-0.2], [0.1], [25.0], [-30.0]]  # Rows 3, 4: confident.
  score, log_loss = _score(
      'y', 'binary', test, _lines(order, logits, ['No', 'Yes']))
  truth = np.array([1, 0, 0, 1, 0])
  p = 1 / (1 + np.exp(-np.array(logits)[:, 0]))
  assert score == pytest.approx(metrics.roc_auc_score(truth, p))
  assert log_loss == pytest.approx(metrics.log_loss(truth, p))
  # Row 1 ("No") at logit 25 would be a miss: its loss 25, not 34.5.
  wrong = _lines(order, [[0.3], [25.0], [0.1], [2.0], [-3.0]], ['No', 'Yes'])
  assert _score('y', 'binary', test, wrong)[1] == (
      pytest.approx((25 + np.logaddexp(0, -0.3) + np.logaddexp(0, 0.1) +
                     np.logaddexp(0, -2.0) + np.logaddexp(0, -3.0)) / 5,
                    rel=1e-6))

  # The vocabulary's order, not the names' sorted one.
  # By row: b, c, a, b right; the last row's a taken for b.
  logits = [[2.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 2.0, 0.0],
            [2.0, 0.0, 0.0], [3.0, 0.0, 0.0]]
  accuracy, log_loss = _score(
      'k', 'multiclass', test, _lines(order, logits, ['b', 'a', 'c']))
  assert accuracy == pytest.approx(0.8)
  shifted = np.array(logits) - np.max(logits, axis=1, keepdims=True)
  probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1,
                                                        keepdims=True)
  assert log_loss == pytest.approx(metrics.log_loss(
      [0, 2, 1, 0, 1], probabilities, labels=[0, 1, 2]))

  predictions = [1.0, 2.0, 0.0, 0.25, 1.0]
  rmse, none = _score(
      'r', 'regression', test, _lines(order, None, predictions=predictions))
  assert none is None
  assert rmse == pytest.approx(np.sqrt(np.mean(
      (np.array(predictions) - [1.5, 2.0, -1.0, 0.25, 3.0]) ** 2)))
  with pytest.raises(ValueError, match='4 predictions of 5 rows'):
    _score('r', 'regression', test, _lines(
        order[:4], None, predictions=predictions))


def _binary(rng, rows, signal):
  truth = rng.integers(0, 2, rows)
  return truth, truth * signal + rng.normal(size=rows)


def test_the_interval_tells_a_real_difference_from_the_rows_draw():
  rng = np.random.default_rng(1)
  truth, strong = _binary(rng, 400, 2.0)
  weak = truth * 0.5 + rng.normal(size=400)
  first = table_scores.Rows('binary', truth, strong)
  second = table_scores.Rows('binary', truth, weak)
  low, high = table_scores.paired_interval(first, second, draws=500)
  difference = first.score() - second.score()
  assert 0 < low < difference < high  # AUC 0.908 against 0.610.
  # One model against itself: no difference in any draw.
  assert table_scores.paired_interval(first, first, draws=50) == (0, 0)
  # 38 rows, the two models alike: an interval wide around 0.
  truth, a = _binary(rng, 38, 0.3)
  b = a + rng.normal(scale=1.0, size=38)
  low, high = table_scores.paired_interval(
      table_scores.Rows('binary', truth, a),
      table_scores.Rows('binary', truth, b), draws=500)
  assert low < 0 < high and high - low > 0.1
  # Paired: the same rows for both (the interval of two RMSEs whose
  # errors differ by a constant on every row is that constant's effect).
  values = rng.normal(size=50)
  exact = table_scores.Rows('regression', values, values + 1.0)
  worse = table_scores.Rows('regression', values, values + 1.5)
  assert table_scores.paired_interval(worse, exact, draws=50) == (
      pytest.approx(0.5), pytest.approx(0.5))
  with pytest.raises(ValueError, match='50 rows against 49'):
    table_scores.paired_interval(exact, table_scores.Rows(
        'regression', values[1:], values[1:]))
