"""absl flags generated from TrainConfig's fields (their defaults, choices
and help), the `--config` file, and the TrainConfig they give."""

import dataclasses
import json
import logging
import typing

from absl import flags

from estimator_trainer import config as config_lib
from estimator_trainer import flag_data
from estimator_trainer import layout
from estimator_trainer import run_record
from estimator_trainer.errors import UsageError

_logger = logging.getLogger(__name__)

_DEFINE = {str: flags.DEFINE_string, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, bool: flags.DEFINE_bool}


def _flag_fields():
  """(field, its value type) of each TrainConfig field that is a flag."""
  hints = typing.get_type_hints(config_lib.TrainConfig)
  for field in dataclasses.fields(config_lib.TrainConfig):
    if 'help' not in field.metadata:
      continue
    if field.metadata.get('parse'):  # TrainConfig parses the text.
      yield field, str
      continue
    # Optional[X] is X with a None default.
    kind = next(arg for arg in (typing.get_args(hints[field.name]) or
                                (hints[field.name],))
                if arg is not type(None))
    yield field, kind


def define_flags(flag_values=flags.FLAGS):
  """Defines a flag per TrainConfig field, plus --job_dir and --config."""
  for field, kind in _flag_fields():
    meta = field.metadata
    help_text = flag_data.help_text(field.name, meta['help'])
    if meta.get('choices'):
      help_text += f' One of: {", ".join(meta["choices"])}.'
    default = meta.get('flag_default', field.default)
    _DEFINE[kind](field.name, default, help_text, flag_values=flag_values)
  flags.DEFINE_string('job_dir', None,
                      'Alias of --model_dir (AI Platform convention).',
                      flag_values=flag_values)
  flags.DEFINE_string(
      'config', None,
      'JSON or YAML file of flag values ({"learning_rate": 0.01, ...}); '
      'flags given on the command line override it.',
      flag_values=flag_values)


def _apply_config_file(path, flag_values):
  """Sets the flags a --config file names, unless given on the command line."""
  try:
    with open(path) as f:
      text = f.read()
  except OSError as e:
    raise UsageError(f'--config {path}: {e.strerror}') from None
  try:
    if path.endswith(('.yaml', '.yml')):
      import yaml  # pylint: disable=g-import-not-at-top
      values = yaml.safe_load(text)
    else:
      values = json.loads(text)
  except Exception as e:  # pylint: disable=broad-except
    message = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise UsageError(f'--config {path}: not valid JSON/YAML ({message})'
                     ) from None
  if not isinstance(values, dict):
    raise UsageError(f'--config {path}: must map flag names to values')
  for name, value in values.items():
    if name not in flag_values or name == 'config':
      raise UsageError(f'--config {path}: unknown flag {name!r}')
    if not flag_values[name].present:
      if isinstance(value, (list, tuple)):  # image_size: [32, 32]
        value = ','.join(str(part) for part in value)
      elif isinstance(value, (dict, bool)):  # model_kwargs: {...}
        value = json.dumps(value)
      try:
        flag_values[name].parse(str(value))
      except flags.Error as e:
        raise UsageError(f'--config {path}: {e}') from None


def config_from_flags(flag_values=flags.FLAGS, record_dir=None):
  """The validated TrainConfig of the parsed flags (and --config file), and
  of the run that model_dir (or `record_dir`: migrate's --from, whose run
  is carried to model_dir, on another engine) records where no flag is
  given, in the TF_CONFIG cluster of the environment."""
  if flag_values.config:
    _apply_config_file(flag_values.config, flag_values)
  values = {field.name: flag_values[field.name].value
            for field, _ in _flag_fields()}
  if flag_values.job_dir:
    if (flag_values['model_dir'].present and
        flag_values.model_dir != flag_values.job_dir):
      raise UsageError('--job_dir is an alias of --model_dir: give one')
    values['model_dir'] = flag_values.job_dir
  # A --config file's values are present too: _apply_config_file parsed them.
  given = {name for name in values if flag_values[name].present}
  model_dir = values['model_dir']
  if record_dir:
    values['model_dir'] = record_dir
    given.add('engine')  # The engine carried to is migrate's to choose.
  values, taken = run_record.read(values, given)
  for name, recorded in run_record.overridden(values, given).items():
    _logger.info('--%s=%s given: the run in %s had %s', name,
                 run_record.shown(values[name]), values['model_dir'],
                 f'no --{name}' if recorded is None else
                 f'--{name}={run_record.shown(recorded)}')
  if taken:
    _logger.info('From %s: %s', layout.model_file(values['model_dir']),
                 ' '.join(f'--{name}={run_record.shown(value)}'
                          for name, value in taken.items()))
  return config_lib.TrainConfig.from_environment(
      **{**values, 'model_dir': model_dir})
