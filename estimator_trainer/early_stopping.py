"""Early stopping on eval accuracy, counted in evaluations: the rule every
engine applies (the estimator engine's hook: estimator/early_stopping_hook.py;
the TF2 engines: tf2/controller.py)."""

import logging

from estimator_trainer import layout

_logger = logging.getLogger(__name__)


def eval_accuracies(eval_dir):
  """{global_step: accuracy} of the evaluations logged in `eval_dir`."""
  return dict(layout.read_scalars(eval_dir).get('accuracy', []))


def evaluations_since_best(accuracies):
  """How many evaluations came after the first one with the best accuracy."""
  steps = sorted(accuracies)
  best = max(steps, key=lambda step: (accuracies[step], -step))
  return len(steps) - 1 - steps.index(best)


def no_improvement(accuracies, patience):
  """True (and logged) once `patience` evaluations of `accuracies`
  ({step: accuracy}) came after the best one."""
  if accuracies and evaluations_since_best(accuracies) >= patience:
    _logger.info('Early stopping: no better eval accuracy in %d evaluations',
                 patience)
    return True
  return False
