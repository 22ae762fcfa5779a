"""The L2 factors structured data's models take by default, from the
training split's statistics (config_resolved.weight_decay_of picks one
per model): the linear model's is scikit-learn's defaults', the deep
models' a multiple of it chosen on the real tables."""

# The deep models' L2 (deep_weight_decay): DEEP_PRIOR_FACTOR x the linear
# prior, but at least the prior of DEEP_PRIOR_ROWS rows.
DEEP_PRIOR_FACTOR = 10
DEEP_PRIOR_ROWS = 50


def _loss_scale(label_scale):
  """What one example's L2 weighs on the mean loss: LogisticRegression's
  half, Ridge's label variance."""
  return label_scale[1] ** 2 if label_scale else 0.5


def prior_weight_decay(statistics, label_scale):
  """The L2 factor on the mean loss of the n training examples that
  LogisticRegression's default (C=1: a log loss's sum plus half the squared
  weights) or Ridge's (alpha=1, on the label's units: the squared error's
  sum plus the squared weights, which are the label's stddev times ours)
  put there."""
  if not statistics.num_examples:
    return None
  return _loss_scale(label_scale) / statistics.num_examples


def deep_weight_decay(statistics, label_scale):
  """The L2 factor of `dnn` and `wide_deep`: the linear prior's over
  DEEP_PRIOR_ROWS rows or fewer (DEEP_PRIOR_FACTOR x it below that).
  Chosen on the real tables (docs/guide/tabular.md, the dnn and wide_deep
  recipe): at the linear prior the DNN over-fit pima, carseats, diabetes
  and caravan (AUC 0.668 vs LogisticRegression's 0.774 on pima); 10 x it
  held the small tables, but on caravan (4,658 rows) 10 x was still 0.074
  AUC short where the prior of 47 rows was 0.011 ahead; 30 x under-fit
  carseats and wine."""
  if not statistics.num_examples:
    return None
  rows = min(statistics.num_examples / DEEP_PRIOR_FACTOR, DEEP_PRIOR_ROWS)
  return _loss_scale(label_scale) / rows
