"""Restoring a TF2 job's model from model_dir's latest checkpoint (which must
be object-based and of the same model; an earlier version's rate variable
and EMA layout adopted), or warm-starting it from --warm_start_from."""

import logging

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import layout
from estimator_trainer import models
from estimator_trainer import weights
from estimator_trainer.errors import TrainerError, first_line
from estimator_trainer.tabular import warm_start as tabular_warm_start
from estimator_trainer.tf2 import ema

_logger = logging.getLogger(__name__)


# Where checkpoints of earlier versions hold the rate Keras made of a float
# --learning_rate (optimizers.py now gives it a schedule).
_OLD_LEARNING_RATE = '_learning_rate'


def _adopt_old_learning_rate(optimizer, path):
  """Lets checkpoint `path` of an earlier version restore without a warning:
  its rate variable is restored into the optimizer's, which Keras recomputes
  from the schedule at every step (the flags decide, not the checkpoint)."""
  key = f'optimizer/{_OLD_LEARNING_RATE}/.ATTRIBUTES/VARIABLE_VALUE'
  if key in dict(tf.train.list_variables(path)):
    optimizer._track_trackable(  # pylint: disable=protected-access
        optimizer.learning_rate, name=_OLD_LEARNING_RATE)


def latest_checkpoint(job, checkpoint=None):
  """Restores model_dir's latest checkpoint into `job`'s objects (or into
  `checkpoint`, a part of them) and returns its step; 0 without one."""
  path = tf.train.latest_checkpoint(job.config.model_dir)
  if not path:
    return 0
  checkpoints.require_object_based(path, job.config)
  if job.coordinator and job.optimizer is not None:
    checkpoints.require_same_parameter_servers(job.config)
  _logger.info('Restoring %s', path)
  if job.optimizer is not None and not checkpoint:
    _adopt_old_learning_rate(job.optimizer, path)
  restored, legacy = checkpoint or job.checkpoint, None
  if job.ema and not checkpoint:
    legacy = ema.stored_layout(path, job.model)
    if legacy:
      restored = tf.train.Checkpoint(**{**job.checkpointed, 'ema': legacy})
  try:
    status = restored.restore(path)
    status.assert_existing_objects_matched()
    if job.optimizer is None or checkpoint:
      status.expect_partial()  # Evaluation needs no optimizer slots.
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    other = checkpoints.other_model(job.config.model_dir,
                                    job.config.model)
    raise TrainerError(
        f'{job.config.model_dir} holds a checkpoint of {other} (or of '
        f'another engine): {first_line(e)}') from None
  if legacy:
    _logger.info('%s also holds averages of batch norm\'s statistics '
                 '(--ema_decay before it averaged trainable weights only): '
                 'left out', path)
    job.ema.adopt(legacy)
  if job.ema and job.optimizer is None and not checkpoint:
    job.ema.copy_to_model()  # Evaluates, predicts or exports: averages.
  return layout.checkpoint_step(path)


def warm_start(job):
  """Warm-starts `job`'s model from --warm_start_from (a tabular source's
  rows remapped by vocabulary)."""
  config, spec = job.config, job.source.spec
  remapping = tabular_warm_start.remapping(
      config.warm_start_from, job.source.statistics)
  # A TF2 checkpoint is read into a model of the source's inputs.
  model_input = remapping.model_input if remapping else spec.model_input
  weights.warm_start(
      job.model, config.warm_start_from, config.warm_start_vars,
      job.weight_names, lambda: models.build(
          config.model, model_input, job.head.logits_dimension,
          config.model_kwargs, precision=config.precision,
          sync_batch_norm=config.sync_batch_norm),
      remapping and remapping.tables(job.model))
