"""The engines and what each offers, in one table.

Validation (`config.py`) and the CLI's dispatch (`run.py`) both read it:
adding an engine is writing its module, with a function per mode it offers,
and one entry here. Imports no TensorFlow: the CLI checks flags first.
"""

import dataclasses
import importlib
from typing import Tuple

MODES = ('train_and_evaluate', 'train', 'evaluate', 'predict', 'export')
STRATEGIES = ('default', 'one_device', 'mirrored', 'multi_worker_mirrored',
              'parameter_server')
# Flags only some engines honour: set on another engine, a usage error.
OPTIONAL_FLAGS = ('early_stopping_evals', 'warm_start_from')
CLUSTER_TASKS = ('chief', 'worker', 'ps', 'evaluator')


@dataclasses.dataclass(frozen=True)
class Engine:
  """An engine: its module and the modes, strategies, optional flags and
  cluster task types it offers."""

  module: str
  modes: Tuple[str, ...] = MODES
  strategies: Tuple[str, ...] = STRATEGIES
  flags: Tuple[str, ...] = OPTIONAL_FLAGS
  cluster_tasks: Tuple[str, ...] = CLUSTER_TASKS

  def run(self, config):
    """Runs `config.mode`; imports the engine (and TensorFlow) only now."""
    module = importlib.import_module(self.module)
    return getattr(module, config.mode)(config)


_TF2 = dict(modes=MODES,
            strategies=('default', 'one_device', 'mirrored',
                        'multi_worker_mirrored'),
            flags=(), cluster_tasks=('chief', 'worker'))

ENGINES = {
    'estimator': Engine('estimator_trainer.estimator'),
    'ctl': Engine('estimator_trainer.tf2.ctl', **_TF2),
    'keras': Engine('estimator_trainer.tf2.keras_fit', **_TF2),
}


def offering(flag):
  """The engines that honour optional `flag`."""
  return [name for name, engine in ENGINES.items() if flag in engine.flags]
