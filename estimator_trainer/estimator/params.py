"""model_fn's `params`: typed, with TrainConfig's defaults, and made from a
run's config."""

import dataclasses
from typing import Any, Dict, Optional, Tuple

from estimator_trainer import deprecation
from estimator_trainer.config import TrainConfig
from estimator_trainer.config_checks import (DEFAULT_LEARNING_RATE,
                                             check_head_flags)
from estimator_trainer.config_resolved import weight_decay_of
from estimator_trainer.sources import KNOWN_CLASS_NAMES


@dataclasses.dataclass(frozen=True)
class ModelParams:
  """model_fn's `params`, typed; the defaults are TrainConfig's.

  `global_batch_size` divides the summed loss (every replica's step then
  means the same); `decay_steps` is the run's length, which training with
  `lr_decay='cosine'` needs; `class_names` (one per class: the logits'
  width) default to the default dataset's (Fashion-MNIST's);
  `eval_images=False` leaves the eval images out (graphs exported for
  another process); `steps_per_run` > 1 makes the train op loop over up
  to that many batches of its iterator (the estimator engine's
  --steps_per_loop, with its train_loop hook). Structured data: `head`
  (heads.KINDS; None: an image classifier), `model_input` (the encoded
  columns: name -> EncodedInput's fields), `huber_delta` and
  `label_scale` (regression: heads.RegressionHead's), `label_smoothing`
  (multiclass; None: config_resolved.label_smoothing_of's default),
  `optimizer_kwargs`; `linear_optimizer`, `linear_learning_rate` and
  `linear_optimizer_kwargs` (wide & deep's wide part);
  `ema_decay`: EVAL and PREDICT restore the weights' moving averages.
  `clip_global_norm` and `accumulate_steps`: TrainConfig's; a step with
  `accumulate_steps` > 1 reads its further micro-batches from the iterator
  too. `step_limit`: each step claims its count on the global step before
  its update, up to this step (estimator/step_apply.py): asynchronous
  workers (the estimator engine's parameter servers) then stop at it
  exactly.
  """

  global_batch_size: int
  optimizer: str = TrainConfig.optimizer
  learning_rate: float = DEFAULT_LEARNING_RATE
  linear_optimizer: Optional[str] = None
  linear_learning_rate: Optional[float] = None
  optimizer_kwargs: Optional[Dict[str, Any]] = None
  linear_optimizer_kwargs: Optional[Dict[str, Any]] = None
  lr_decay: str = TrainConfig.lr_decay
  decay_steps: Optional[int] = None
  weight_decay: float = 0.0
  clip_global_norm: Optional[float] = None
  accumulate_steps: int = TrainConfig.accumulate_steps
  label_smoothing: Optional[float] = TrainConfig.label_smoothing
  precision: str = TrainConfig.precision
  ema_decay: Optional[float] = TrainConfig.ema_decay
  seed: Optional[int] = TrainConfig.seed
  sync_batch_norm: bool = TrainConfig.sync_batch_norm
  class_names: Tuple[str, ...] = KNOWN_CLASS_NAMES['fashion_mnist']
  eval_images: bool = True
  steps_per_run: int = 1
  head: Optional[str] = None
  model_input: Optional[Dict[str, Dict[str, Any]]] = None
  huber_delta: Optional[float] = None
  label_scale: Optional[Tuple[float, float]] = None
  step_limit: Optional[int] = None

  def __post_init__(self):
    check_head_flags(self, self.head or 'multiclass')

  @classmethod
  def from_dict(cls, params):
    """ModelParams of a `params` dict; unknown keys are an error, not
    silently ignored."""
    if 'dataset' in params:  # 0.1.0's key; its classes are class_names now.
      deprecation.warn("model_fn's params key 'dataset'",
                       "'class_names' (the dataset's class names)",
                       removed_in='0.3.0')
      params = dict(params)
      dataset = params.pop('dataset')
      if dataset not in KNOWN_CLASS_NAMES:
        raise ValueError(f'model_fn params: dataset {dataset!r} is none of '
                         f'{", ".join(sorted(KNOWN_CLASS_NAMES))}')
      params.setdefault('class_names', KNOWN_CLASS_NAMES[dataset])
    names = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(params) - names)
    if unknown:
      raise ValueError(f'model_fn params: unknown {", ".join(unknown)} '
                       f'(known: {", ".join(sorted(names))})')
    if 'global_batch_size' not in params:
      raise ValueError('model_fn params: global_batch_size is required')
    return cls(**params)


def model_params(config, global_batch_size, train_steps, spec=None):
  """The `params` dict (ModelParams' fields) of a run of `config` that trains
  `train_steps` steps on data of `spec` (a sources.DatasetSpec; without it,
  the default dataset's classes)."""
  return dataclasses.asdict(ModelParams(
      global_batch_size=global_batch_size, optimizer=config.optimizer,
      learning_rate=config.learning_rate, lr_decay=config.lr_decay,
      linear_optimizer=config.linear_optimizer,
      linear_learning_rate=config.linear_learning_rate,
      optimizer_kwargs=config.optimizer_kwargs,
      linear_optimizer_kwargs=config.linear_optimizer_kwargs,
      decay_steps=train_steps,
      step_limit=(train_steps if config.strategy == 'parameter_server'
                  else None),
      weight_decay=weight_decay_of(config, spec),
      clip_global_norm=config.clip_global_norm,
      accumulate_steps=config.accumulate_steps,
      label_smoothing=config.label_smoothing,
      precision=config.precision, ema_decay=config.ema_decay,
      seed=config.seed,
      sync_batch_norm=config.sync_batch_norm,
      **({'class_names': tuple(spec.class_names)} if spec else {}),
      **({'head': spec.head, 'huber_delta': config.huber_delta,
          'label_scale': spec.label_scale,
          'model_input': {name: dataclasses.asdict(value)
                          for name, value in spec.model_input.items()}}
         if spec is not None and spec.head else {})))
