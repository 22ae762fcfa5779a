"""model_dir's checkpoints: which step is latest, whether there is one, and
whether it fits the model, before Estimator runs.

Estimator restores model_dir's latest checkpoint by variable name. A
checkpoint of another model fails only in session creation, after training
has written events to model_dir, with a first line that names neither the
directory nor the variable.
"""

import contextlib
import dataclasses
import json
import logging
import os
import shlex

import tensorflow as tf

from estimator_trainer import config_checks
from estimator_trainer import heads
from estimator_trainer import layout
from estimator_trainer import models
from estimator_trainer import outputs
from estimator_trainer import run_record
from estimator_trainer import weights
from estimator_trainer.errors import TrainerError, UsageError

_logger = logging.getLogger(__name__)


def require_checkpoint(model_dir):
  """Fails unless model_dir holds a checkpoint (to evaluate, export...)."""
  if not tf.train.latest_checkpoint(model_dir):
    raise TrainerError(f'no checkpoint in {model_dir}; train first')


def record_model(model_dir, config, spec, max_steps=None):
  """Notes in model_dir which model and data shape its checkpoints are of,
  and the settings of the run (which the CLI takes for a later run there:
  run_record.read), when training starts or resumes there; left as it is
  when the run is the same (a rerun changes nothing). A run that left its
  length to the default records its plan, `max_steps`, as its
  --train_steps: the default's floor is the recipe's, which a later
  version may change, and the run's own command resumes the same plan."""
  if max_steps and config.train_steps is None and (
      config.train_epochs is None):
    config = dataclasses.replace(config, train_steps=max_steps)
  model = models.name_of(config.model)
  record = {'model': model, 'model_kwargs': config.model_kwargs,
            **spec.record(), 'run': dict(run_record.of(config), model=model)}
  if config.strategy == 'parameter_server' and config.cluster:
    record['parameter_servers'] = parameter_servers(config)
  if layout.read_model_file(model_dir) != json.loads(json.dumps(record)):
    outputs.write_atomic(layout.model_file(model_dir),
                         json.dumps(record, indent=1))


def parameter_servers(config):
  """The number of ps tasks in config's cluster."""
  return len(config.cluster.jobs.get('ps', []))


def require_same_parameter_servers(config):
  """Fails unless a TF2 parameter-server run resumes over as many ps tasks
  as model_dir's run had: Keras's optimizer checkpoints its slots of a
  partitioned variable shard by shard, and over another number of shards
  they would not be restored (the model's variables would)."""
  record = layout.read_model_file(config.model_dir) or {}
  before = record.get('parameter_servers')
  now = parameter_servers(config)
  if before is not None and before != now:
    raise UsageError(
        f'{config.model_dir} trained over {before} parameter servers; this '
        f'cluster has {now}: resume with {before} (the optimizer\'s slots of '
        'partitioned variables are saved per ps), or --warm_start_from it '
        'into a new --model_dir')


# The flags `migrate` builds the run's model and optimizer from.
_MIGRATE_FLAGS = (
    'dataset', 'train_split', 'eval_split', 'image_size', 'data_source',
    'data_dir', 'idx_dir', 'train_files', 'eval_files', 'eval_fraction',
    'image_key', 'label_key', 'image_shape', 'num_classes', 'feature_spec',
    'head',
    'huber_delta', 'model', 'model_kwargs', 'sync_batch_norm', 'precision',
    'weight_decay', 'optimizer', 'optimizer_kwargs', 'linear_optimizer',
    'linear_learning_rate', 'linear_optimizer_kwargs', 'ema_decay')


def _flag(name, value):
  if isinstance(value, bool):
    return f'--{"" if value else "no"}{name}'
  if isinstance(value, (tuple, list)):
    value = ','.join(map(str, value))
  elif isinstance(value, dict):
    value = json.dumps(value, separators=(',', ':'))
  elif callable(value):
    value = models.name_of(value)
  return shlex.quote(f'--{name}={value}')


def migrate_command(config, to):
  """The `migrate` command line that carries model_dir's Estimator
  checkpoint over to the TF2 model_dir `to`, with the run's model,
  optimizer and data flags (those not at their defaults)."""
  defaults = {field.name: field.default
              for field in dataclasses.fields(config)}
  # The model's default is the data's (TrainConfig resolves None).
  defaults['model'] = config_checks.default_model(config.structured)
  flags = [_flag(name, getattr(config, name)) for name in _MIGRATE_FLAGS
           if getattr(config, name) != defaults[name]]
  return ' '.join(['python -m estimator_trainer.migrate',
                   shlex.quote(f'--from={config.model_dir}'),
                   shlex.quote(f'--to={to}'), *flags])


def require_object_based(path, config):
  """Fails, giving the `migrate` command, when `path` (model_dir's latest
  checkpoint) is an Estimator's: keyed by variable name, it restores
  nothing into the TF2 engines' objects."""
  if weights.is_object_based(dict(tf.train.list_variables(path))):
    return
  to = f'{config.model_dir.rstrip("/")}_tf2'
  raise UsageError(  # The command to run first: a usage error (exit 2).
      f'{config.model_dir} holds an Estimator checkpoint '
      f'({os.path.basename(path)}), which --engine={config.engine} cannot '
      f'read: carry it over to a new model_dir with `'
      f'{migrate_command(config, to)}` and run on --model_dir={to}')


def other_model(model_dir, model):
  """How to name what model_dir's checkpoint is of, beside --model `model`:
  'model resnet20, not cnn' when model_dir recorded it."""
  try:
    with tf.io.gfile.GFile(layout.model_file(model_dir)) as f:
      recorded = json.load(f).get('model')
  except (tf.errors.OpError, ValueError, AttributeError):
    recorded = None
  model = models.name_of(model)
  if recorded and recorded != model:
    return f'model {recorded}, not {model}'
  return 'a different model'


@contextlib.contextmanager
def none_untrained(model_dir):
  """Training in model_dir that fails before its first step leaves no
  checkpoint there: Estimator saves step 0 as its session starts, and a
  rerun would restore that one, or fail on it when the fix changes the
  model (--image_shape). Checkpoints model_dir held before stay."""
  had_checkpoint = bool(tf.train.latest_checkpoint(model_dir))
  try:
    yield
  except Exception:
    path = tf.train.latest_checkpoint(model_dir)
    if not had_checkpoint and path and layout.checkpoint_step(path) == 0:
      for name in tf.io.gfile.glob(f'{path}.*'):
        tf.io.gfile.remove(name)
      # Lists that checkpoint alone: Estimator's restore starts from it.
      state = os.path.join(model_dir, 'checkpoint')
      if tf.io.gfile.exists(state):
        tf.io.gfile.remove(state)
      _logger.info('Removed %s: no step was trained', path)
    raise


def latest_step(model_dir):
  """The step of model_dir's latest checkpoint; -1 without one."""
  path = tf.train.latest_checkpoint(model_dir)
  return layout.checkpoint_step(path) if path else -1


def check_compatible(model_dir, model_fn, params, training, model_input,
                     model='cnn'):
  """Fails unless model_dir's latest checkpoint can restore `model_fn`'s graph.

  Passes when there is no checkpoint. Training restores the optimizer's
  variables too; evaluation, prediction and export the model's alone.
  Variables the checkpoint has beyond those are fine, as for Estimator.
  """
  path = tf.train.latest_checkpoint(model_dir)
  if not path:
    return
  try:
    stored = dict(tf.train.list_variables(path))
  except tf.errors.OpError as e:
    raise TrainerError(f'cannot read checkpoint {path}: '
                       f'{e.message.strip().splitlines()[0]}') from None
  # EVAL restores the variables PREDICT has (its metrics' are local), so
  # PREDICT's graph serves both without building the metrics.
  mode = (tf.estimator.ModeKeys.TRAIN if training else
          tf.estimator.ModeKeys.PREDICT)
  # One step per run of one micro-batch: the same variables as a loop of
  # them (whose count is a local variable), without the input iterator a
  # loop reads.
  expected = _graph_variables(
      model_fn, dict(params, steps_per_run=1, accumulate_steps=1), mode,
      model_input)
  missing = sorted(set(expected) - set(stored))
  reshaped = sorted(name for name in set(expected) & set(stored)
                    if list(stored[name]) != expected[name])
  if missing:
    more = f' and {len(missing) - 1} more' if len(missing) > 1 else ''
    problem = f'{os.path.basename(path)} lacks {missing[0]}{more}'
  elif reshaped:
    name = reshaped[0]
    problem = (f'{name} has shape {list(stored[name])} in '
               f'{os.path.basename(path)}, expected {expected[name]}')
  else:
    return
  raise TrainerError(
      f'{model_dir} holds a checkpoint of {other_model(model_dir, model)}: '
      f'{problem}')


def _graph_variables(model_fn, params, mode, model_input):
  """Name -> shape of the variables Estimator would restore in `mode`."""
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()  # Estimator adds it too.
    features = {name: tf.compat.v1.placeholder(spec.dtype, spec.shape)
                for name, spec in models.input_signature(model_input).items()}
    label_spec = (heads.make(params['head'], params['class_names']).label_spec
                  if params.get('head') else tf.TensorSpec([None], tf.int64))
    labels = tf.compat.v1.placeholder(label_spec.dtype, label_spec.shape)
    model_fn(features, labels, mode, params)
    return {v.op.name: v.shape.as_list()
            for v in tf.compat.v1.global_variables()}
