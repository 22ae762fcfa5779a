"""Early stopping on the eval score, counted in evaluations: the rule every
engine applies (the estimator engine's hook: estimator/early_stopping_hook.py;
the TF2 engines: tf2/controller.py).

The score of an evaluation, higher better, follows its head (heads/):
accuracy where the head has classes, else the mean AUC (multilabel), else
minus the average loss (regression). `--export=best` ranks by it too.
"""

import logging

from estimator_trainer import layout

_logger = logging.getLogger(__name__)

# (metric, sign): the first an evaluation has is its score.
_SCORES = (('accuracy', 1), ('auc', 1), ('average_loss', -1))
# With --validation_fraction, what an evaluation of the evaluation split
# hands its exporters holds the score of the same step's validation
# evaluation: `--export=best` ranks by it (best_weights.py).
VALIDATION_SCORE = 'validation_score'


def score(eval_result):
  """The score of an evaluation's metrics (a dict): its validation
  score if it holds one."""
  if VALIDATION_SCORE in eval_result:
    return float(eval_result[VALIDATION_SCORE])
  for name, sign in _SCORES:
    if name in eval_result:
      return sign * float(eval_result[name])
  raise KeyError(f'no {" or ".join(name for name, _ in _SCORES)} in '
                 f'{sorted(eval_result)}')


def eval_accuracies(eval_dir):
  """{global_step: score} of the evaluations logged in `eval_dir`."""
  scalars = layout.read_scalars(eval_dir)
  for name, sign in _SCORES:
    if name in scalars:
      return {step: sign * value for step, value in scalars[name]}
  return {}


def evaluations_since_best(accuracies):
  """How many evaluations came after the first one with the best accuracy."""
  steps = sorted(accuracies)
  best = max(steps, key=lambda step: (accuracies[step], -step))
  return len(steps) - 1 - steps.index(best)


def no_improvement(accuracies, patience, split='eval'):
  """True (and logged) once `patience` evaluations of `accuracies`
  ({step: accuracy}, of `split`) came after the best one."""
  if accuracies and evaluations_since_best(accuracies) >= patience:
    _logger.info('Early stopping: no better %s score in %d evaluations',
                 split, patience)
    return True
  return False
