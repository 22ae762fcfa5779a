"""The engines, in one table.

Validation (`config_checks.py`) and the CLI's dispatch (`run.py`) both read it:
adding an engine is writing its module, with a function per mode (every
engine offers every mode, strategy and cluster task), and one entry here.
Imports no TensorFlow: the CLI checks flags first.
"""

import contextlib
import dataclasses
import importlib

from estimator_trainer import outputs
from estimator_trainer import run_lock
from estimator_trainer import stack

MODES = ('train_and_evaluate', 'train', 'evaluate', 'predict', 'export')
# The modes that write checkpoints: a run of one holds its model_dir
# (run_lock.py); the others only read it.
TRAINING_MODES = MODES[:2]
STRATEGIES = ('default', 'one_device', 'mirrored', 'multi_worker_mirrored',
              'parameter_server')
CLUSTER_TASKS = ('chief', 'worker', 'ps', 'evaluator')
# What sets the length of a run that gives none where the floor would
# (structured dnn and wide_deep on small tables), under its model_dir's lock.
_LENGTH_CHOICE = 'estimator_trainer.length_choice'


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
    with _removed_if_failed(config), _locked(config):
      # Refused (model_dir in use) before TensorFlow loads: at once.
      config = importlib.import_module(_LENGTH_CHOICE).planned(config)
      module = importlib.import_module(self.module)
      return getattr(module, config.mode)(config)


def _removed_if_failed(config):
  """A run alone removes the model_dir it made when it fails (outputs.py);
  a cluster's tasks share theirs."""
  if config.cluster is not None:
    return contextlib.nullcontext()
  return outputs.none_of_a_failed_run(config.model_dir)


def _locked(config):
  """model_dir's lock (run_lock.py) for a training run, held by its chief
  in a cluster."""
  if config.mode not in TRAINING_MODES or not (
      config.cluster is None or config.cluster.is_chief):
    return contextlib.nullcontext()
  return run_lock.held(config.model_dir, config.cluster)


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
