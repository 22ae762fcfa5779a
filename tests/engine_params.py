"""Every engine as a test parameter; the estimator engine's marked
`estimator`, which stacks without tf.estimator skip (conftest.py)."""

import pytest

from estimator_trainer import engines


def param(name, *values):
  """Engine `name` (and more `values` of the test's parameters)."""
  marks = pytest.mark.estimator if engines.ENGINES[name].needs_estimator else ()
  return pytest.param(name, *values, marks=marks)


ENGINES = [param(name) for name in engines.ENGINES]
