"""The one frozen configuration of a run; every check of user input is here."""

import dataclasses
import math
import os
from typing import Optional

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import engines
from estimator_trainer import layout
from estimator_trainer.errors import UsageError

DATASETS = ('fashion_mnist', 'mnist')
DATA_SOURCES = ('auto', 'tfds', 'idx')
EXPORTS = ('final', 'latest', 'best', 'none')
COMMUNICATIONS = ('auto', 'ring', 'nccl')
OPTIMIZERS = ('adam', 'sgd')
LR_DECAYS = ('cosine', 'none')
PRECISIONS = ('float32', 'mixed_bfloat16')
DEFAULT_BATCH_SIZE_PER_REPLICA = 64
DEFAULT_TRAIN_EPOCHS = 10


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Everything a run needs, validated on construction.

  Batch: give `batch_size_per_replica` or `global_batch_size`, not both; with
  neither, 64 per replica. Length: `train_steps` or `train_epochs`, not both;
  with neither, 10 epochs.
  """

  model_dir: str
  mode: str = 'train_and_evaluate'
  engine: str = 'estimator'
  dataset: str = 'fashion_mnist'
  data_source: str = 'auto'
  data_dir: Optional[str] = None
  idx_dir: Optional[str] = None
  train_files: Optional[str] = None
  eval_files: Optional[str] = None
  strategy: str = 'default'
  eval_strategy: str = 'default'
  communication: str = 'auto'
  cpu_replicas: int = 0
  intra_op_threads: int = 0
  inter_op_threads: int = 0
  batch_size_per_replica: Optional[int] = None
  global_batch_size: Optional[int] = None
  optimizer: str = 'adam'
  learning_rate: float = 1e-3
  lr_decay: str = 'cosine'
  weight_decay: float = 0.0
  precision: str = 'float32'
  train_steps: Optional[int] = None
  train_epochs: Optional[float] = None
  shuffle_buffer: int = 60000
  seed: int = 42
  steps_per_loop: int = 1
  save_checkpoints_steps: int = 1000
  save_summary_steps: int = 100
  log_step_count_steps: int = 100
  keep_checkpoint_max: int = 5
  throttle_secs: int = 60
  export: str = 'final'
  early_stopping_evals: int = 0
  warm_start_from: Optional[str] = None
  warm_start_vars: str = '.*'
  num_predictions: int = 10
  predictions_file: Optional[str] = None
  cluster_timeout_secs: int = 600
  # This process's place in a cluster: from TF_CONFIG, as in TensorFlow.
  cluster: Optional[cluster_lib.Cluster] = dataclasses.field(
      default_factory=cluster_lib.from_environment)

  def __post_init__(self):
    _check_choice('mode', self.mode, engines.MODES)
    _check_choice('engine', self.engine, tuple(engines.ENGINES))
    _check_choice('dataset', self.dataset, DATASETS)
    _check_choice('data_source', self.data_source, DATA_SOURCES)
    _check_choice('strategy', self.strategy, engines.STRATEGIES)
    _check_choice('eval_strategy', self.eval_strategy, engines.STRATEGIES)
    _check_choice('communication', self.communication, COMMUNICATIONS)
    _check_choice('optimizer', self.optimizer, OPTIMIZERS)
    _check_choice('lr_decay', self.lr_decay, LR_DECAYS)
    _check_choice('precision', self.precision, PRECISIONS)
    _check_choice('export', self.export, EXPORTS)
    if not self.model_dir:
      raise UsageError('--model_dir must be given')
    if bool(self.train_files) != bool(self.eval_files):
      raise UsageError('give both --train_files and --eval_files')
    if self.data_source == 'idx' and not self.idx_dir:
      raise UsageError('--data_source=idx needs --idx_dir')
    if self.idx_dir and not os.path.isdir(self.idx_dir):
      raise UsageError(f'--idx_dir {self.idx_dir!r} is not a directory')
    if (self.batch_size_per_replica is not None and
        self.global_batch_size is not None):
      raise UsageError(
          'give --batch_size_per_replica or --global_batch_size, not both')
    _check_positive('batch_size_per_replica', self.batch_size_per_replica)
    _check_positive('global_batch_size', self.global_batch_size)
    if self.train_steps is not None and self.train_epochs is not None:
      raise UsageError('give --train_steps or --train_epochs, not both')
    _check_positive('train_steps', self.train_steps)
    _check_positive('train_epochs', self.train_epochs)
    _check_positive('learning_rate', self.learning_rate)
    _check_positive('steps_per_loop', self.steps_per_loop)
    _check_positive('save_checkpoints_steps', self.save_checkpoints_steps)
    _check_positive('save_summary_steps', self.save_summary_steps)
    _check_positive('log_step_count_steps', self.log_step_count_steps)
    _check_positive('keep_checkpoint_max', self.keep_checkpoint_max)
    _check_positive('num_predictions', self.num_predictions)
    _check_positive('cluster_timeout_secs', self.cluster_timeout_secs)
    cluster_lib.check_strategy(self.cluster, self.strategy, self.eval_strategy)
    self._check_engine_offers()
    if self.engine == 'estimator' and self.cluster and self.mode == 'train':
      # Estimator trains multi-worker only inside train_and_evaluate
      # (its distribute coordinator; tensorflow#46556).
      raise UsageError('in a TF_CONFIG cluster, train with '
                       '--mode=train_and_evaluate')
    if self.warm_start_from and not os.path.exists(self.warm_start_from) and (
        '://' not in self.warm_start_from):
      raise UsageError(f'--warm_start_from {self.warm_start_from!r} does not '
                       'exist')
    for name in ('cpu_replicas', 'intra_op_threads', 'inter_op_threads',
                 'shuffle_buffer', 'throttle_secs',
                 'weight_decay', 'early_stopping_evals'):
      if getattr(self, name) < 0:
        raise UsageError(f'--{name} must be >= 0, got {getattr(self, name)}')

  def _check_engine_offers(self):
    """The mode, strategy, flags and cluster tasks fit the engine."""
    engine = engines.ENGINES[self.engine]
    context = f' with --engine={self.engine}'
    _check_choice('mode', self.mode, engine.modes, context)
    _check_choice('strategy', self.strategy, engine.strategies, context)
    for name in engines.OPTIONAL_FLAGS:
      if getattr(self, name) and name not in engine.flags:
        raise UsageError(f'--{name} needs --engine='
                         f'{" or ".join(engines.offering(name))}')
    if self.cluster:
      tasks = [*self.cluster.jobs, *([cluster_lib.EVALUATOR]
                                     if self.cluster.has_evaluator else [])]
      others = [task for task in tasks if task not in engine.cluster_tasks]
      if others:
        raise UsageError(
            f'TF_CONFIG: --engine={self.engine} runs '
            f'{" and ".join(engine.cluster_tasks)} tasks only (no '
            f'{" or ".join(others)})')

  def resolve_global_batch_size(self, num_replicas: int) -> int:
    """The global batch for `num_replicas` replicas in sync."""
    if self.global_batch_size is None:
      per_replica = (self.batch_size_per_replica or
                     DEFAULT_BATCH_SIZE_PER_REPLICA)
      return per_replica * num_replicas
    if self.global_batch_size % num_replicas:
      raise UsageError(
          f'--global_batch_size {self.global_batch_size} does not divide by '
          f'the {num_replicas} replicas in sync')
    return self.global_batch_size

  def resolve_train_steps(self, num_train_examples: int,
                          global_batch_size: int) -> int:
    """`train_steps`, or the steps of `train_epochs` (10 by default)."""
    if self.train_steps is not None:
      return self.train_steps
    epochs = self.train_epochs or DEFAULT_TRAIN_EPOCHS
    return max(1, math.ceil(epochs * num_train_examples / global_batch_size))

  @property
  def resolved_predictions_file(self) -> str:
    return self.predictions_file or layout.predictions_file(self.model_dir)

  def model_params(self, global_batch_size: int, train_steps: int) -> dict:
    """The `params` dict `model_fn` reads."""
    return {
        'optimizer': self.optimizer,
        'learning_rate': self.learning_rate,
        'lr_decay': self.lr_decay,
        'decay_steps': train_steps,
        'weight_decay': self.weight_decay,
        'precision': self.precision,
        'global_batch_size': global_batch_size,
        'seed': self.seed,
        'dataset': self.dataset,  # Class names of eval images.
    }


def _check_choice(name, value, choices, context=''):
  if value not in choices:
    raise UsageError(f'--{name} must be one of {", ".join(choices)}'
                     f'{context}; got {value!r}')


def _check_positive(name, value):
  if value is not None and not value > 0:
    raise UsageError(f'--{name} must be > 0, got {value}')
