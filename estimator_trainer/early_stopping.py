"""Early stopping on eval accuracy, counted in evaluations."""

import glob
import os

import tensorflow as tf


def eval_accuracies(eval_dir):
  """{global_step: accuracy} of the evaluations logged in `eval_dir`."""
  accuracies = {}
  for path in glob.glob(os.path.join(eval_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == 'accuracy':
          accuracies[event.step] = value.simple_value
  return accuracies


def evaluations_since_best(accuracies):
  """How many evaluations came after the first one with the best accuracy."""
  steps = sorted(accuracies)
  best = max(steps, key=lambda step: (accuracies[step], -step))
  return len(steps) - 1 - steps.index(best)


def make_hook(estimator, patience, check_every_steps=100):
  """Stops training once `patience` evaluations brought no better accuracy.

  Through `make_early_stopping_hook` with `run_every_steps`: under any
  `train_distribute` it takes the multi-worker path, which rejects
  `run_every_secs` and makes every worker stop together.
  """
  def should_stop():
    accuracies = eval_accuracies(estimator.eval_dir())
    if accuracies and evaluations_since_best(accuracies) >= patience:
      tf.compat.v1.logging.info(
          'Early stopping: no better eval accuracy in %d evaluations',
          patience)
      return True
    return False

  return tf.estimator.experimental.make_early_stopping_hook(
      estimator, should_stop, run_every_secs=None,
      run_every_steps=check_every_steps)
