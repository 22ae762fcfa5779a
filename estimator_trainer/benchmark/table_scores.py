"""How the structured-data benchmark scores a model, the package's runs and
scikit-learn's baselines alike: `Rows`, a model's predictions of the
evaluation rows in their order, scored by scikit-learn (the exact AUC,
accuracy or RMSE, and the mean log loss); `of_predictions`, a run's
--mode=predict lines as Rows; and `paired_interval`, how far two models'
scores part on the same rows beyond what those rows' draw moves them (a
paired bootstrap: on birthwt's 38 evaluation rows the interval of two
models' AUC difference is 0.15 wide).

Needs the `benchmark` extra (scikit-learn, pandas).
"""

import dataclasses

import numpy as np

DRAWS = 2000


@dataclasses.dataclass(frozen=True)
class Rows:
  """A `head`'s predictions of the evaluation rows, row by row: `truth`
  the class ids (their place in the model's classes) or values;
  `predicted` a binary's probabilities of class 1, a multiclass's rows of
  probabilities, a regression's values."""
  head: str
  truth: np.ndarray
  predicted: np.ndarray

  def score(self, rows=slice(None)):
    """AUC, accuracy or RMSE (the head's) of `rows` (default: all)."""
    # pylint: disable=g-import-not-at-top
    from sklearn import metrics
    truth, predicted = self.truth[rows], self.predicted[rows]
    if self.head == 'regression':
      return float(np.sqrt(np.mean((predicted - truth) ** 2)))
    if self.head == 'binary':
      return float(metrics.roc_auc_score(truth, predicted))
    return float(np.mean(predicted.argmax(axis=1) == truth))

  def log_loss(self):
    """The mean log loss (None for a regression)."""
    # pylint: disable=g-import-not-at-top
    from sklearn import metrics
    if self.head == 'regression':
      return None
    classes = 2 if self.head == 'binary' else self.predicted.shape[1]
    return float(metrics.log_loss(self.truth, self.predicted,
                                  labels=list(range(classes))))


def of_predictions(label, head, test, lines):
  """Rows of a run's predictions `lines` (--mode=predict's, parsed) of
  the CSV `test`, whose column `label` is a `head` label: each line at
  the CSV row it names, each label by its class name's place in the
  run's classes (the CSV's text, as the run read it). A classifier's
  probabilities come from its logits: the lines' probabilities are
  rounded to 6 decimals, and a confident miss's rounded 0 would cost log
  loss's clip, not its loss."""
  # pylint: disable=g-import-not-at-top
  import pandas as pd
  labels = pd.read_csv(test, dtype=str, keep_default_na=False)[label]
  if len(lines) != len(labels):
    raise ValueError(f'{len(lines)} predictions of {len(labels)} rows')
  lines = sorted(lines, key=lambda line: line['line'])
  truth = labels.iloc[[line['line'] - 2 for line in lines]].tolist()
  if head == 'regression':
    return Rows(head, np.array(truth, np.float64),
                np.array([line['predictions'][0] for line in lines]))
  classes = lines[0]['all_classes']
  ids = np.array([classes.index(name) for name in truth])
  logits = np.array([line['logits'] for line in lines], np.float64)
  if head == 'binary':
    return Rows(head, ids, 1 / (1 + np.exp(-logits[:, 0])))
  logits -= logits.max(axis=1, keepdims=True)
  return Rows(head, ids, np.exp(logits) / np.exp(logits).sum(
      axis=1, keepdims=True))


def paired_interval(first, second, draws=DRAWS, seed=0):
  """The 95 % interval of first.score() - second.score() over `draws`
  resamples (with replacement) of the evaluation rows, the same rows for
  both models: an interval that holds 0 is a difference those rows do not
  tell from their draw. (Resamples with one class, which have no AUC, are
  drawn again.)"""
  count = len(first.truth)
  if len(second.truth) != count:
    raise ValueError(f'{count} rows against {len(second.truth)}')
  rng = np.random.default_rng(seed)
  differences = []
  while len(differences) < draws:
    rows = rng.integers(0, count, count)
    if first.head == 'binary' and len(set(first.truth[rows])) < 2:
      continue
    differences.append(first.score(rows) - second.score(rows))
  low, high = np.percentile(differences, [2.5, 97.5])
  return float(low), float(high)
