"""Train Keras models on image datasets with tf.estimator, correctly
distributed, and move to TF2 engines on the same input, model and loss.

The stable API legacy pipelines import:

    from estimator_trainer import (TrainConfig, make_input_fn, model_fn,
                                   make_model_fn, make_run_config, model_params,
                                   train_and_evaluate, trainer_fn)

and a canned Estimator's users, their feature columns as a feature spec:

    from estimator_trainer import feature_spec_from_columns

Its changes are listed in docs/CHANGELOG.md; a name removed or renamed keeps
working for one release, with a DeprecationWarning naming its replacement.

Imported lazily, so that `python -m estimator_trainer.run` can set up
TensorFlow's environment before TensorFlow loads. Importing the package
first also makes `tf.keras` Keras 2 on TensorFlow 2.16+ (stack.py).
"""

import importlib

from estimator_trainer import stack

stack.use_keras_2()

__version__ = '0.2.0'

_API = {
    'TrainConfig': 'estimator_trainer.config',
    'feature_spec_from_columns': 'estimator_trainer.tabular.feature_columns',
    'make_input_fn': 'estimator_trainer.data',
    'model_fn': 'estimator_trainer.estimator',
    'make_model_fn': 'estimator_trainer.estimator',
    'make_run_config': 'estimator_trainer.estimator',
    'model_params': 'estimator_trainer.estimator',
    'train_and_evaluate': 'estimator_trainer.engines',
    'trainer_fn': 'estimator_trainer.estimator',
}
__all__ = sorted(_API)


def __getattr__(name):
  if name in _API:
    if _API[name] == 'estimator_trainer.estimator':
      stack.require_estimator(name)
    return getattr(importlib.import_module(_API[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
