"""A model_dir's record of its run (layout.MODEL_FILE, which training
writes): the settings the CLI takes from it for a later run there, and the
checks of given flags against what its checkpoints are of."""

import dataclasses
import json

from estimator_trainer import config_checks
from estimator_trainer import engines
from estimator_trainer import flag_data
from estimator_trainer import layout
from estimator_trainer import model_recipe
from estimator_trainer import stack
from estimator_trainer.errors import UsageError

# A model_dir's record of its run (layout.MODEL_FILE, which training writes):
# the CLI takes from it every setting that no flag gives (read).
# Not recorded: where and how this process runs, and what this invocation
# asks for.
_NOT_RECORDED = ('model_dir', 'mode', 'strategy', 'eval_strategy',
                 'communication', 'cpu_replicas', 'intra_op_threads',
                 'inter_op_threads', 'warm_start_from', 'warm_start_vars',
                 'num_predictions', 'predictions_file', 'predict_files',
                 'cluster_timeout_secs', 'cluster')
# The flags that name the data: given one, the record's data source is left
# whole (its split, shape, keys... still apply, unless given).
_DATA_SOURCE = ('dataset', 'data_source', 'data_dir', 'idx_dir',
                'train_files', 'eval_files', 'eval_fraction', 'feature_spec')
_DATA_PATHS = ('data_dir', 'idx_dir', 'train_files', 'eval_files',
               'feature_spec')
# Alternatives: given one, neither is taken from the record.
_ALTERNATIVES = (('batch_size_per_replica', 'global_batch_size'),
                 ('train_steps', 'train_epochs'))


def read(values, given):
  """`values` (field -> flag value) with the settings that the run recorded
  in values['model_dir'] took, where not `given` (the names of the flags
  given, on the command line or in a --config file), and the dict of those
  taken.

  Evaluation, prediction and export read the record of any model_dir;
  training only that of a model_dir with a checkpoint (it resumes that run).
  Structured data's feature spec is the one stored in the model_dir, where
  it holds one (tabular/dataset.py checks a given one against it).
  A given flag that disagrees with what the checkpoints are of (the model,
  its kwargs, the image shape and classes) is a usage error.
  """
  model_dir = values['model_dir']
  record = _record(values)
  if record is None:
    return values, {}
  # Records written before the run was: the model alone.
  run = record.get('run') or {name: record[name] for name in (
      'model', 'model_kwargs') if name in record}
  model = record.get('model')
  if model and (model.startswith('__main__:') or '<' in model):
    # A builder of a script, or a closure, through the Python API: no module
    # names it to the CLI.
    if 'model' not in given:
      raise UsageError(f'{model_dir} holds a run of {model}, which no '
                       'module names: give its --model=MODULE:FUNCTION')
    record = {key: value for key, value in record.items() if key != 'model'}
  elif model and ':' in model and 'model' not in given:
    # A model_dir is data: the code a run imports is the command's to name,
    # not a file's that anyone who can write to model_dir could change.
    raise UsageError(
        f'{model_dir} holds a run of --model={model}, a builder of your own '
        f'(its {layout.MODEL_FILE}): give --model={model} to run it (a '
        'model_dir names no code to import)')
  _check_given(model_dir, record, values, given)
  kept = set(given) | set(_NOT_RECORDED)
  for group in (_DATA_SOURCE, *_ALTERNATIVES):
    if kept & set(group):
      kept |= set(group)
  # Nor a setting the run's head did not read: records of earlier versions
  # hold --label_smoothing's default then, 0.1, whatever the head.
  head = record.get('head') or 'multiclass'
  taken = {name: value for name, value in run.items()
           if name in values and name not in kept and value != values[name]
           and config_checks.HEAD_FLAGS.get(name, head) == head}
  stored_spec = layout.stored_feature_spec(model_dir)
  if stored_spec:
    # That spec (or a given one, checked against it) names the label: a run
    # on CSV files without a spec recorded --label_key, an image flag
    # beside a spec.
    for name in config_checks.IMAGE_FLAGS:
      taken.pop(name, None)
  if stored_spec and 'feature_spec' not in given:
    # The spec stored with the statistics, not what the recorded path (or
    # none, given other data flags) holds now: the checkpoints' own.
    taken['feature_spec'] = stored_spec
    if 'label_key' in given:
      # The run's own command repeated (CSV files, the label --label_key):
      # its spec's label, else a flag that disagrees with the checkpoints.
      label = _label_of(stored_spec)
      if values['label_key'] != label:
        raise UsageError(
            f'--label_key={values["label_key"]} disagrees with {model_dir},'
            f' whose checkpoints are of the label {label!r} (its feature '
            f'spec, {stored_spec}): drop the flag, or use another '
            '--model_dir')
      taken['label_key'] = config_checks.DEFAULT_LABEL_KEY
  engine = engines.ENGINES.get(taken.get('engine'))
  if engine and engine.needs_estimator and not stack.has_estimator():
    raise UsageError(
        f'{model_dir} holds a run of --engine={taken["engine"]} (its '
        f'{layout.MODEL_FILE}), which needs TensorFlow 2.15 with '
        f'tensorflow-estimator; this is TensorFlow '
        f'{stack.tensorflow_version()}: run it on the default install, or '
        'carry it over to the TF2 engines with estimator_trainer.migrate')
  return {**values, **taken}, taken


def _label_of(spec_file):
  """The label a stored feature spec (JSON, spec.to_json's) names."""
  label = layout.read_json(spec_file, 'a feature spec').get('label')
  return ','.join(label) if isinstance(label, list) else label


def _record(values):
  """The record of values['model_dir'] that a run of `values` reads (None:
  none): any model_dir's to evaluate, predict or export, one with a
  checkpoint to train."""
  model_dir = values['model_dir']
  if values['mode'] in config_checks.TRAINING_MODES and not (
      layout.has_checkpoint(model_dir)):
    return None
  return layout.read_model_file(model_dir)


def overridden(values, given):
  """name -> the recorded value, of each setting that a flag of `given`
  gives otherwise than the run values['model_dir'] records (e.g. a carried
  canned model's learning rate): the run says that it takes the flag. Not
  the length: a run resumed for more steps is the usual case."""
  run = (_record(values) or {}).get('run') or {}
  found = {}
  for name in sorted(given):
    if (name not in run or name in _NOT_RECORDED or name in _DATA_SOURCE or
        name in _CHECKPOINT_DEFINED or name in _ALTERNATIVES[1]):
      continue
    value = values[name]
    if name.endswith('_kwargs') and isinstance(value, str):
      value = config_checks.json_object_of(name)(value)
    if value != run[name]:
      found[name] = run[name]
  return found


# What a given flag must agree with: the checkpoint's model, head and data
# shape, as the record names them; each parsed as the field is.
_CHECKPOINT_DEFINED = {
    'model': str,
    'model_kwargs': lambda value: config_checks.json_object(value or {}),
    'head': str,
    'image_shape': config_checks.ints('image_shape', 3),
    'num_classes': int,
}
# Recorded as None by a run without the flag, whose model has its builder's
# defaults: a given value is another model. (A None image shape or class
# count is the data's, which the run read.)
_NONE_IS_A_SETTING = ('model_kwargs',)
# The optimizers whose slots the checkpoints hold, as the run recorded them.
_RUN_DEFINED = ('optimizer', 'linear_optimizer')
# Which training records the checkpoints were trained on: the validation
# part is held out of them (a run recorded before the flag had none).
_SPLIT_DEFINED = ('validation_fraction', 'cv_fold')
# Whose momentum (on or off) the slots the checkpoints hold follow.
_SLOTS_DEFINED = ('optimizer_kwargs', 'linear_optimizer_kwargs')


def _as_built(name, model, value, recorded):
  """A given flag `value` and the `recorded` one as the run there builds
  them: --model_kwargs without the recipe's kwargs take the record's
  (model_recipe.py), so the run's own command, which gave none, agrees."""
  if name != 'model_kwargs':
    return value, recorded
  return (model_recipe.completed(model, value, recorded),
          model_recipe.completed(model, recorded, recorded))


def _momentum(name, value):
  """Whether --optimizer_kwargs (or --linear_...) `value` gives SGD a
  momentum: its slots, which a checkpoint holds or not."""
  if isinstance(value, str):
    value = config_checks.json_object_of(name)(value)
  return bool((value or {}).get('momentum'))


def _check_given(model_dir, record, values, given):
  run = record.get('run') or {}
  for name in given:
    if name in _CHECKPOINT_DEFINED and (record.get(name) is not None or (
        name in _NONE_IS_A_SETTING and name in record)):
      parse, raw = _CHECKPOINT_DEFINED[name], record[name]
      value, recorded = _as_built(name, record.get('model'),
                                  parse(values[name]), parse(raw))
    elif name in _RUN_DEFINED and name in run or (
        name in _SPLIT_DEFINED and run):
      raw = run.get(name)
      value, recorded = values[name], raw
    elif name in _SLOTS_DEFINED and name in run:
      value, recorded = (_momentum(name, values[name]),
                         _momentum(name, run[name]))
      if value != recorded:
        run_of = 'with' if recorded else 'without'
        raise UsageError(
            f'--{name}={shown(values[name])} disagrees with {model_dir}, '
            f'whose checkpoints are of a run {run_of} SGD\'s momentum (its '
            f'slots; its {layout.MODEL_FILE}): drop the flag, or use another '
            '--model_dir')
      continue
    else:
      continue
    if value != recorded:
      # A flag the run was without is not '--name=None', which no user gives.
      of_run = (f'a run without --{name}' if raw is None else
                f'--{name}={shown(recorded)}')
      raise UsageError(
          f'--{name}={shown(values[name])} disagrees with {model_dir}, '
          f'whose checkpoints are of {of_run} (its {layout.MODEL_FILE}): '
          'drop the flag, or use another --model_dir')


def shown(value):
  """A value as a flag gives it."""
  if isinstance(value, (list, tuple)):
    return ','.join(str(part) for part in value)
  return json.dumps(value) if isinstance(value, dict) else str(value)


def of(config):
  """The settings of run `config` (a TrainConfig) that its model_dir records (JSON values;
  a builder function as given: the caller names it). Local data paths are
  made absolute: a later run may start in another directory. A run on
  structured data records no image settings: it read none (its --dataset
  would name an image dataset it never saw)."""
  record = {}
  for field in dataclasses.fields(config):
    if field.name in _NOT_RECORDED or (config.structured and
                                       field.name in flag_data.IMAGES):
      continue
    value = getattr(config, field.name)
    if field.name in _DATA_PATHS:
      value = layout.absolute(value)
    record[field.name] = list(value) if isinstance(value, tuple) else value
  return record
