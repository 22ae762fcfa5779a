"""What a TrainConfig resolves to for a run: its global batch, its steps,
the learning settings that depend on the data (label smoothing, weight
decay), the line that describes it. TrainConfig's methods of these names
are these functions (hence their first parameter, `self`)."""

import dataclasses
import json
import math
from typing import Optional

from estimator_trainer import deprecation
from estimator_trainer import layout
from estimator_trainer.config_checks import (CSV_SUFFIXES,
                                             DEFAULT_BATCH_SIZE_PER_REPLICA,
                                             DEFAULT_TRAIN_EPOCHS,
                                             IMAGE_LABEL_SMOOTHING,
                                             STRUCTURED_MODEL,
                                             default_learning_rate,
                                             min_structured_steps)
from estimator_trainer.config_optimizers import CONSTANT_RATE_OPTIMIZERS
from estimator_trainer.errors import UsageError


def structured(self):
  """Whether the run is on structured data: a --feature_spec, or CSV
  training files (whose spec is then inferred, the label --label_key)."""
  return bool(self.feature_spec) or bool(self.train_files) and all(
      pattern.strip().endswith(CSV_SUFFIXES)
      for pattern in self.train_files.split(','))


def resolved_predictions_file(self) -> str:
  return self.predictions_file or layout.predictions_file(self.model_dir)


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
  """`train_steps`, or the optimizer steps of `train_epochs` (10 by
  default; structured data: at least min_structured_steps): each reads
  `accumulate_steps` global batches."""
  if self.train_steps is not None:
    return self.train_steps
  epochs = self.train_epochs or DEFAULT_TRAIN_EPOCHS
  steps = max(1, math.ceil(epochs * num_train_examples /
                           (global_batch_size * self.accumulate_steps)))
  if self.structured and not self.train_epochs:
    return max(steps, min_structured_steps(self.model))
  return steps


def model_params(self, global_batch_size: int, train_steps: Optional[int],
                 spec=None) -> dict:
  """Deprecated (0.2.0): `estimator_trainer.model_params(config, ...)`."""
  deprecation.warn(
      'TrainConfig.model_params',
      'estimator_trainer.model_params(config, global_batch_size, '
      'train_steps, spec=None)', removed_in='0.3.0')
  # The estimator engine loads only when asked: config.py runs without it.
  return deprecation.moved_to('estimator_trainer.estimator.params.'
                              'model_params')(self, global_batch_size,
                                              train_steps, spec)


def describe(self, model_name: str, data: str, num_replicas: int,
             global_batch_size: int, train_steps: Optional[int] = None,
             num_train_examples: Optional[int] = None) -> str:
  """What this run does, resolved: `data` names the source, the rest are
  the engine's figures (training only: the steps and the train split's
  size). Then the other settings that are not at their defaults."""
  model = model_name + (f' {json.dumps(self.model_kwargs)}'
                        if self.model_kwargs else '')
  per_replica = global_batch_size // num_replicas
  parts = [
      f'{self.mode} with engine {self.engine}, strategy {self.strategy} '
      f'({num_replicas} replica{"s" if num_replicas > 1 else ""} in sync)',
      f'model {model}', f'data {data}',
      f'batch {per_replica} per replica, {global_batch_size} global']
  if train_steps is not None:
    epochs = self.train_epochs or (
        train_steps * global_batch_size * self.accumulate_steps /
        num_train_examples)
    parts.append(f'{train_steps} steps ({epochs:.4g} '
                 f'epoch{"" if epochs == 1 else "s"} of '
                 f'{num_train_examples} training examples)')
  # The data's description names its files, not the spec (issue 75,
  # item 3): feature_spec is among the others.
  described = {'mode', 'engine', 'strategy', 'model', 'model_kwargs',
               'dataset', 'train_files', 'eval_files', 'eval_fraction',
               'validation_fraction', 'skip_rows_without_label',
               'data_source', 'idx_dir', 'batch_size_per_replica',
               'global_batch_size', 'train_steps', 'train_epochs', 'cluster'}
  # The rate a run left to its model is filled in: at that, a default.
  defaults = {field.name: field.default for field in dataclasses.fields(self)}
  defaults['learning_rate'] = default_learning_rate(self)
  others = [f'{name}={getattr(self, name)!r}'
            for name, default in defaults.items()
            if name not in described and getattr(self, name) != default]
  if others:
    parts.append(', '.join(others))
  if self.lr_decay == 'cosine' and set(CONSTANT_RATE_OPTIMIZERS) & {
      self.optimizer, self.linear_optimizer}:
    parts.append(f'{", ".join(CONSTANT_RATE_OPTIMIZERS)} keeps a constant '
                 'rate, as canned Estimators do')
  return '; '.join(parts)


def label_smoothing_of(label_smoothing, images):
  """The label smoothing a multiclass head applies: `label_smoothing` if
  given, else IMAGE_LABEL_SMOOTHING for `images`, 0 for structured data."""
  if label_smoothing is None:
    return IMAGE_LABEL_SMOOTHING if images else 0.0
  return label_smoothing


def weight_decay_of(config, spec):
  """The L2 factor of `config`'s run on data of `spec`: --weight_decay if
  given, else for STRUCTURED_MODEL the spec's `prior_weight_decay` (the
  linear model then fits what LogisticRegression or Ridge fits), for
  `dnn` and `wide_deep` its `deep_weight_decay`, else 0."""
  if config.weight_decay is not None:
    return config.weight_decay
  field = {STRUCTURED_MODEL: 'prior_weight_decay',
           'dnn': 'deep_weight_decay',
           'wide_deep': 'deep_weight_decay'}.get(config.model)
  return (field and getattr(spec, field, None)) or 0.0
