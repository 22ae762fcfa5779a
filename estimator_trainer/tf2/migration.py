"""An Estimator checkpoint carried over to the TF2 engines (migrate.py is
its command line).

Estimator keys a checkpoint by variable name, the TF2 engines by object.
Every weight (by the names models.check gives), the global step (as the
optimizer's `iterations`), the optimizers' slots, --ema_decay's averages and
mixed_float16's loss scale are placed; a variable that cannot be placed
fails, naming it.
"""

import dataclasses
import logging
import os

import numpy as np
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import ema_recipe
from estimator_trainer import layout
from estimator_trainer import loss_scale
from estimator_trainer import model_recipe
from estimator_trainer import optimizers
from estimator_trainer import run_record
from estimator_trainer import weights
from estimator_trainer.errors import TrainerError, UsageError
from estimator_trainer.layout import AVERAGE_SUFFIX
from estimator_trainer.optimizers import ADAM_BETA_1
from estimator_trainer.tabular import dataset
from estimator_trainer.tf2 import canned
from estimator_trainer.tf2 import canned_settings
from estimator_trainer.tf2 import job as job_lib

_logger = logging.getLogger(__name__)


def convert(config, source, estimator_engine=False, given=()):
  """Writes into `config.model_dir` (which must hold no checkpoint) the TF2
  checkpoint of the Estimator checkpoint `source` (or its model_dir's
  latest), of `config`'s model and optimizer. Returns its path. A canned
  Estimator's (tf2/canned.py) may be carried to the package's estimator
  engine instead: `estimator_engine`; its model and training settings are
  its own, and one of `given` (the flags given) that differs is a usage
  error."""
  checkpoint = (tf.train.latest_checkpoint(source)
                if tf.io.gfile.isdir(source) else source)
  if not checkpoint or not tf.io.gfile.exists(f'{checkpoint}.index'):
    raise TrainerError(f'--from {source}: no checkpoint there')
  reader = tf.train.load_checkpoint(checkpoint)
  stored = reader.get_variable_to_shape_map()
  if weights.is_object_based(stored):
    raise TrainerError(f'--from {checkpoint} is a TF2 engine checkpoint '
                       'already: train on its model_dir')
  if tf.train.latest_checkpoint(config.model_dir):
    raise UsageError(f'--to {config.model_dir} holds a checkpoint: carry '
                     'over into a new model_dir')
  before = (set(tf.io.gfile.listdir(config.model_dir))
            if tf.io.gfile.isdir(config.model_dir) else None)
  is_canned = canned_settings.is_canned(stored)
  _logger.info(
      'Migrate: reading %s (%s); writing %s checkpoint into %s', checkpoint,
      "a canned Estimator's" if is_canned else "the estimator engine's",
      "the estimator engine's" if is_canned and estimator_engine
      else "the TF2 engines' (ctl, keras)", config.model_dir)
  try:
    if is_canned:
      return _convert_canned(config, checkpoint, reader, estimator_engine,
                             given)
    return _convert_own(config, checkpoint, reader, stored)
  except BaseException:
    _remove_written(config.model_dir, before)
    raise


def _remove_written(model_dir, before):
  """A failed carry leaves nothing in `model_dir` but what was there
  `before` (its listing; None: it did not exist)."""
  if before is None:
    if tf.io.gfile.exists(model_dir):
      tf.io.gfile.rmtree(model_dir)
    return
  for name in set(tf.io.gfile.listdir(model_dir)) - before:
    path = os.path.join(model_dir, name.rstrip('/'))
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    else:
      tf.io.gfile.remove(path)


def _convert_own(config, checkpoint, reader, stored):
  """The package's own Estimator checkpoint: the model and optimizers of
  `config`."""
  trained = _optimizer_of(stored)
  if config.optimizer == 'adam' and trained != 'adam':
    raise TrainerError(f'{checkpoint} holds no Adam slots (no beta1_power): '
                       f'its Estimator trained with --optimizer={trained}; '
                       f'give migrate --optimizer={trained}')
  if config.feature_spec:  # Checked against the stored one before a write.
    dataset.feature_spec_of(config, os.path.dirname(checkpoint))
  _carry_preprocessing(os.path.dirname(checkpoint), config.model_dir)
  # The model the checkpoint's run recorded (model_recipe.py).
  config = model_recipe.resolved(config, source=os.path.dirname(checkpoint))
  job = job_lib.Job(config, migrating=True)
  names = job.weight_names
  weights.assign(job.model, names,
                 weights.read_weights(checkpoint, names, build_model=None),
                 checkpoint)
  step = int(reader.get_tensor('global_step'))
  placed = {*names, 'global_step'}
  name_of = {weight.ref(): name for weight, name in zip(job.model.weights,
                                                        names)}
  flag_of = {job.optimizer: ('optimizer', config.optimizer,
                             config.optimizer_kwargs)}
  if job.linear_optimizer:
    flag_of[job.linear_optimizer] = ('linear_optimizer',
                                     config.linear_optimizer,
                                     config.linear_optimizer_kwargs)
  job.make_slots()
  for optimizer, part in job.optimizer_parts:
    flag, name, kwargs = flag_of[optimizer]
    optimizer.iterations.assign(step)
    if name == 'adam':
      _check_adam_steps(reader, checkpoint, step, (kwargs or {}).get(
          'beta_1', ADAM_BETA_1))
      placed |= {'beta1_power', 'beta2_power'}
    for v1_slot, keras_slots in optimizers.slots(name, kwargs):
      # Keras 2's optimizers keep a variable's slot at its index in the
      # built var_list (no public slot accessor); under mixed_float16, the
      # loss-scaling optimizer's inner one.
      keras_slots = getattr(getattr(optimizer, 'inner_optimizer', optimizer),
                            keras_slots)
      for index, variable in enumerate(part):
        key = f'{name_of[variable.ref()]}/{v1_slot}'
        if key not in stored:
          raise TrainerError(f'{checkpoint} has no {key}: was it trained '
                             f'with --{flag}={name}?')
        keras_slots[index].assign(reader.get_tensor(key))
        placed.add(key)
  placed |= _carry_averages(job, reader, checkpoint, names)
  placed |= _carry_loss_scale(job, reader, checkpoint)
  unplaced = sorted(set(stored) - placed)
  if unplaced:
    linear = (f'--linear_optimizer={config.linear_optimizer}, '
              if config.linear_optimizer else '')
    more = f' and {len(unplaced) - 1} more' if len(unplaced) > 1 else ''
    raise TrainerError(f'{checkpoint}: cannot place {unplaced[0]}{more} '
                       f'(--optimizer={config.optimizer}, {linear}'
                       f'--model={config.model})')
  job.save(step)
  return _recorded(job, config, checkpoint, step)


def _recorded(job, config, checkpoint, step):
  checkpoints.record_model(config.model_dir, config, job.source.spec)
  job.finish(trained=False)
  path = tf.train.latest_checkpoint(config.model_dir)
  _logger.info('Carried %s over to %s (step %d)', checkpoint, path, step)
  return path


def _convert_canned(config, checkpoint, reader, estimator_engine, given):
  """A canned Estimator's checkpoint (tf2/canned.py): the model and
  optimizers canned_settings reads; the flags' feature spec (its columns'),
  data and head."""
  if not config.feature_spec:
    raise UsageError(f'--from {checkpoint} is a canned Estimator\'s: give '
                     '--feature_spec (feature_spec_from_columns of its '
                     'feature columns) and its --train_files')
  settings = canned_settings.read(reader, checkpoint)
  values = settings.config_values()
  for name, value in values.items():
    if (name in given or name == 'model_kwargs' and
        config.model_kwargs is not None) and getattr(config, name) != value:
      shown = run_record.shown
      raise UsageError(
          f'--{name}={shown(getattr(config, name))}: the canned model in '
          f'{checkpoint} is of --{name}={shown(value)} (its checkpoint and '
          'graph say so), which migrate carries; drop the flag (give it to '
          'run to train on otherwise)')
  # Canned's own training settings, recorded in the model_dir for runs on
  # (by the engine whose checkpoint it writes).
  config = dataclasses.replace(
      config, **values,
      engine='estimator' if estimator_engine else config.engine)
  data = dataset.load(config, training=False)
  if data.spec.head == 'regression':
    # Canned's weights and slots are in the label's units: so is the model.
    data.persist(config.model_dir, label_units=True)
  job = job_lib.Job(config, migrating=True)
  if data.spec.head == 'regression' and tuple(
      job.source.spec.label_scale or ()) != (0.0, 1.0):
    raise TrainerError(f'--to {config.model_dir} holds statistics of another'
                       ' run (a label scale): carry over into a new '
                       'model_dir')
  canned_optimizers = {job.optimizer: settings.dnn or settings.linear}
  if job.linear_optimizer:
    canned_optimizers[job.linear_optimizer] = settings.linear
  step = canned.carry(job, reader, checkpoint, canned_optimizers)
  if estimator_engine:
    canned.save_for_estimator(job, canned_optimizers, step)
  else:
    job.save(step)
  return _recorded(job, config, checkpoint, step)


def _carry_averages(job, reader, checkpoint, names):
  """With --ema_decay: places the Estimator's averages of the weights
  `names` (estimator/moving_average.py) in the job's; returns their keys."""
  if not job.ema:
    return set()
  averaged = {id(weight) for weight in ema_recipe.averaged(job.model)}
  keys = [f'{name}/{AVERAGE_SUFFIX}'
          for name, weight in zip(names, job.model.weights)
          if id(weight) in averaged]
  for key, average in zip(keys, job.ema.averages):
    if not reader.has_tensor(key):
      raise TrainerError(f'{checkpoint} has no {key}: was it trained with '
                         '--ema_decay?')
    average.assign(reader.get_tensor(key))
  # --ema_decay before it averaged trainable weights only also averaged
  # batch norm's statistics: left out.
  left_out = {f'{name}/{AVERAGE_SUFFIX}' for name in names} - set(keys)
  return set(keys) | {key for key in left_out if reader.has_tensor(key)}


def _carry_loss_scale(job, reader, checkpoint):
  """The Estimator's dynamic loss scale (loss_scale.V1LossScale: one for
  every part) in each part's loss-scaling optimizer, its skipped steps in
  the job's; returns their keys. A float32 checkpoint starts a float16 run
  at the initial scale."""
  keys = {name: f'{loss_scale.FLOAT16}/{name}'
          for name in ('loss_scale', 'good_steps', 'skipped_steps')}
  if not reader.has_tensor(keys['loss_scale']):
    return set()
  if job.skipped_steps is None:
    raise TrainerError(f'{checkpoint} was trained with --precision='
                       f'{loss_scale.FLOAT16} (it holds {keys["loss_scale"]})'
                       f': give migrate --precision={loss_scale.FLOAT16}')
  for optimizer, _ in job.optimizer_parts:
    # Keras keeps the scale's variables in a private state object (no
    # setter); reading `loss_scale` first creates them.
    optimizer.loss_scale  # pylint: disable=pointless-statement
    state = optimizer._loss_scale  # pylint: disable=protected-access
    state.current_loss_scale.assign(reader.get_tensor(keys['loss_scale']))
    state.counter.assign(reader.get_tensor(keys['good_steps']))
  job.skipped_steps.assign(reader.get_tensor(keys['skipped_steps']))
  return set(keys.values())


def _optimizer_of(stored):
  """The --optimizer whose v1 slots the checkpoint's variables (`stored`)
  hold: sgd when none."""
  for name, slots in optimizers.SLOTS.items():
    if slots and any(key.endswith(f'/{slots[0][0]}') for key in stored):
      return name
  return 'sgd'


def _carry_preprocessing(source_dir, model_dir):
  """Copies structured data's stored statistics (layout.PREPROCESSING_DIR)
  along: the model was trained on them, not on what the data give now. Not
  its directories (a cluster's shares of the statistics pass, done with),
  nor the record of the training files they are of: without it they are a
  trained model's, kept and checked against the data as a resumed chief's
  are (a warning if they differ); with it, files changed since would make
  them stale before the carried checkpoint is written (computed again,
  another model's preprocessing)."""
  source = layout.preprocessing_dir(source_dir)
  if not tf.io.gfile.isdir(source):
    return
  target = layout.preprocessing_dir(model_dir)
  tf.io.gfile.makedirs(target)
  record = os.path.basename(layout.training_files_file(model_dir))
  for name in tf.io.gfile.listdir(source):
    path = os.path.join(source, name)
    if name != record and not tf.io.gfile.isdir(path):
      tf.io.gfile.copy(path, os.path.join(target, name), overwrite=True)


def _check_adam_steps(reader, checkpoint, step, beta_1):
  """Estimator's Adam counts its steps in beta1_power (beta1 ** (steps + 1));
  Keras's in `iterations`, set to the global step. They must agree."""
  beta1_power = float(reader.get_tensor('beta1_power'))
  if not np.isclose(beta1_power, beta_1 ** (step + 1), rtol=1e-4):
    raise TrainerError(
        f'{checkpoint}: beta1_power {beta1_power:.6g} is not {beta_1} '
        f'** (global_step {step} + 1): Adam did not step with the global '
        'step')
