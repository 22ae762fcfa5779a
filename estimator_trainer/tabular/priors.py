"""The L2 factors structured data's models take by default, from the
training split's statistics (config_resolved.weight_decay_of picks one
per model): the linear model's is scikit-learn's defaults', the deep
models' a multiple of it chosen on the real tables."""

# The deep models' L2 (deep_weight_decay): DEEP_PRIOR_FACTOR x the linear
# prior, but at most the prior of DEEP_PRIOR_ROWS rows.
DEEP_PRIOR_FACTOR = 30
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
  max(DEEP_PRIOR_ROWS, n / DEEP_PRIOR_FACTOR) rows. Chosen on the 24 real
  tables with the periodic numeric embedding on (docs/guide/tabular.md,
  the dnn and wide_deep recipe; ctl, 2026-12-07): within issue 72's bar on
  23 of 24, where the rule before, min(n/10, max(50, n/100)) rows, met 21.
  The weaker L2 mended default (8,000 rows: log loss +1.0 % of
  LogisticRegression's at n/30, +5.1 % at n/100) and penguins (275 rows:
  log loss 0.0276 at 50 rows, 0.0391 at n/10; LogisticRegression's
  0.0313); caravan held at n/30 (AUC 0.7751; 0.7740 at 50 rows). Without the embedding it is not better:
  caravan fell out of the bar (AUC 0.7467, LogisticRegression's 0.7610)
  and carseats (RMSE +6.0 % of Ridge's)."""
  if not statistics.num_examples:
    return None
  n = statistics.num_examples
  rows = max(DEEP_PRIOR_ROWS, n / DEEP_PRIOR_FACTOR)
  return _loss_scale(label_scale) / rows
