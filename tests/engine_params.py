"""Every engine as a test parameter; the estimator engine's marked
`estimator`, which stacks without tf.estimator skip (conftest.py), and the
TF2 engines' run on the default stack only unless marked `both_stacks`."""

import pytest

from estimator_trainer import engines


def param(name, *values, both_stacks=False):
  """Engine `name` (and more `values` of the test's parameters); a TF2
  engine's run on the TensorFlow 2.21 stack too when `both_stacks`
  (conftest.py)."""
  marks = [pytest.mark.estimator] if engines.ENGINES[name].needs_estimator else (
      [pytest.mark.both_stacks] if both_stacks else [])
  return pytest.param(name, *values, marks=marks)


def engines_with(both_stacks):
  """Every engine, those named in `both_stacks` run on both stacks."""
  return [param(name, both_stacks=name in both_stacks)
          for name in engines.ENGINES]


ENGINES = engines_with(both_stacks=())
# The two kinds of engine, Estimator's and the tf2 Job's. Keras's fit trains
# ctl's Job (its optimizers and step, tf2/updates.py; restore and warm start;
# the Controller's checkpoints, evaluation, export and record): a test of
# that code runs here, one of fit's own (its loop and callback, micro-batch
# split, compiled loss and metrics) in keras too.
KINDS = [param('estimator'), param('ctl')]
