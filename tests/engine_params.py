"""Every engine as a test parameter; the estimator engine's marked
`estimator`, which stacks without tf.estimator skip (conftest.py)."""

import pytest

from estimator_trainer import engines

ENGINES = [pytest.param(name, marks=pytest.mark.estimator)
           if engine.needs_estimator else name
           for name, engine in engines.ENGINES.items()]
