"""The engines, in one table.

Validation (`config_checks.py`) and the CLI's dispatch (`run.py`) both read it:
adding an engine is writing its module, with a function per mode (every
engine offers every mode, strategy and cluster task), and one entry here.
Imports no TensorFlow: the CLI checks flags first.
"""

import dataclasses
import importlib

from estimator_trainer import outputs
from estimator_trainer import stack

MODES = ('train_and_evaluate', 'train', 'evaluate', 'predict', 'export')
STRATEGIES = ('default', 'one_device', 'mirrored', 'multi_worker_mirrored',
              'parameter_server')
CLUSTER_TASKS = ('chief', 'worker', 'ps', 'evaluator')


@dataclasses.dataclass(frozen=True)
class Engine:
  """An engine: the module with a function per mode."""

  module: str
  needs_estimator: bool = False  # tf.estimator: TensorFlow 2.15 at most.

  def run(self, config):
    """Runs `config.mode`; imports the engine (and TensorFlow) only now."""
    if self.needs_estimator:
      stack.require_estimator(
          f'--engine={config.engine} (on {config.model_dir}: `python -m '
          'estimator_trainer.migrate --from=MODEL_DIR --to=NEW_DIR` carries '
          'an Estimator model_dir over to the TF2 engines)')
    module = importlib.import_module(self.module)
    if config.cluster is not None:  # Its tasks share the model_dir.
      return getattr(module, config.mode)(config)
    with outputs.none_of_a_failed_run(config.model_dir):
      return getattr(module, config.mode)(config)


ENGINES = {
    'estimator': Engine('estimator_trainer.estimator', needs_estimator=True),
    'ctl': Engine('estimator_trainer.tf2.ctl'),
    'keras': Engine('estimator_trainer.tf2.keras_fit'),
}
TF2_ENGINES = ('ctl', 'keras')


def train_and_evaluate(config):
  """The whole job of `config` (a TrainConfig) in its engine
  (`config.engine`: estimator, ctl or keras): trains, evaluates and exports
  as its mode train_and_evaluate does; returns metrics.json's dict (None on
  a cluster task that writes none). The package root's
  `train_and_evaluate`."""
  return ENGINES[config.engine].run(dataclasses.replace(
      config, mode='train_and_evaluate'))
