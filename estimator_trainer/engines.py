"""The engines and what each offers, in one table.

Validation (`config.py`) and the CLI's dispatch (`run.py`) both read it:
adding an engine is writing its module, with a function per mode (every
engine offers every mode), and one entry here. Imports no TensorFlow: the
CLI checks flags first.
"""

import dataclasses
import importlib
from typing import Tuple

MODES = ('train_and_evaluate', 'train', 'evaluate', 'predict', 'export')
STRATEGIES = ('default', 'one_device', 'mirrored', 'multi_worker_mirrored',
              'parameter_server')
CLUSTER_TASKS = ('chief', 'worker', 'ps', 'evaluator')


@dataclasses.dataclass(frozen=True)
class Engine:
  """An engine: its module and the strategies and cluster task types it
  offers."""

  module: str
  strategies: Tuple[str, ...] = STRATEGIES
  cluster_tasks: Tuple[str, ...] = CLUSTER_TASKS

  def run(self, config):
    """Runs `config.mode`; imports the engine (and TensorFlow) only now."""
    module = importlib.import_module(self.module)
    return getattr(module, config.mode)(config)


_TF2 = dict(strategies=('default', 'one_device', 'mirrored',
                        'multi_worker_mirrored'),
            cluster_tasks=('chief', 'worker'))

ENGINES = {
    'estimator': Engine('estimator_trainer.estimator'),
    'ctl': Engine('estimator_trainer.tf2.ctl', **_TF2),
    'keras': Engine('estimator_trainer.tf2.keras_fit', **_TF2),
}

