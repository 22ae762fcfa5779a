"""What a valid TrainConfig is: the recipe's constants and the choices its
fields offer, the parsers of fields given as text, and the checks of user
input across fields (a UsageError: exit 2) but for those of the parts held
out of the training records (config_data.check). config.py holds the
fields and calls both on construction."""

import dataclasses
import json
import os

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import config_optimizers
from estimator_trainer import engines
from estimator_trainer.errors import UsageError

DEFAULT_BATCH_SIZE_PER_REPLICA = 64
DEFAULT_TRAIN_EPOCHS = 10
# The training files of structured data without a --feature_spec.
CSV_SUFFIXES = ('.csv', '.csv.gz')
# Structured data's recipe, chosen on twelve real tables against
# scikit-learn's LogisticRegression and Ridge (docs/guide/tabular.md#the-
# default-recipe): the linear model reached them on every table, the DNN
# overfitted the small ones; 10 epochs were 30 to 70 steps on tables of a
# few hundred rows, far from converged, hence a floor in steps.
STRUCTURED_MODEL = 'linear'
DEFAULT_LEARNING_RATE = 2e-3
# The structured linear model's: with its prior L2 (weight_decay_of) 2,000
# steps reach LogisticRegression's fit on the 24 real tables of
# docs/guide/tabular-measurements.md, where 2e-3 and 1e-2 fell short (Adam
# moves a weight about its rate a step); canned's linear rate is 0.2 (DNN
# 0.05).
LINEAR_LEARNING_RATE = 5e-2
MIN_STRUCTURED_STEPS = 2000
# The linear model's floor: 4,000 steps bring its log loss within 1.3 % of
# LogisticRegression's on every binary table of docs/guide/tabular.md
# (creditcard; 2,000 steps left it 3.3 % above, 3,000 1.9 %).
MIN_LINEAR_STEPS = 4000
# The built-in models' names (models.BUILTIN_NAMES, which imports
# TensorFlow; a test keeps them equal).
MODEL_NAMES = ('cnn', 'resnet20', 'linear', 'dnn', 'wide_deep')
TRAINING_MODES = engines.TRAINING_MODES
# What structured data's logits mean (heads/).
HEADS = ('multiclass', 'binary', 'multilabel', 'regression')
# The flags that only one head reads (heads/) -> that head: given to a run
# of another head, a usage error, never shown as applied.
HEAD_FLAGS = {'label_smoothing': 'multiclass', 'huber_delta': 'regression'}
# The part of structured training files held out to evaluate on when no
# --eval_files are given (the baselines' 80/20 split in docs/guide/tabular.md).
DEFAULT_EVAL_FRACTION = 0.2
DEFAULT_LABEL_KEY = 'label'

# The flags of image data, which structured data (--feature_spec) does not
# read: given with it, a usage error.
IMAGE_FLAGS = ('image_size', 'augment', 'image_key', 'label_key',
               'image_shape', 'num_classes')
# The image recipe's label smoothing (docs/guide/command-line.md); structured
# data's heads smooth nothing unless asked, as canned Estimators' heads.
IMAGE_LABEL_SMOOTHING = 0.1


def ints(name, count):
  """Parser of `count` positive ints given as 'A,B,...' (or a list)."""
  def parse(value):
    if isinstance(value, str):
      value = [part for part in value.replace('x', ',').split(',') if part]
    try:
      result = tuple(int(part) for part in value)
    except (TypeError, ValueError):
      result = ()
    if len(result) != count or min(result) < 1:
      raise UsageError(f'--{name} must be {count} positive integers '
                       f'separated by commas, got {value!r}')
    return result
  return parse


def option(default, help, choices=None, above=None, at_least=None,  # pylint: disable=redefined-builtin
           parse=None):
  """A TrainConfig field with its flag's help; `choices`, `above` (>) and
  `at_least` (>=) are checked on construction (check_field). `parse` turns
  the flag's text (or a --config file's value) into the field's value."""
  return dataclasses.field(default=default, metadata=dict(
      help=help, choices=choices, above=above, at_least=at_least,
      parse=parse))


def json_object_of(name):
  """A parser of flag `name`'s JSON object."""
  def parse(value):
    if isinstance(value, str):
      try:
        value = json.loads(value)
      except ValueError as e:
        raise UsageError(f'--{name}: not JSON ({e})') from None
    if not isinstance(value, dict):
      raise UsageError(f'--{name} must be a JSON object, got {value!r}')
    return value
  return parse


json_object = json_object_of('model_kwargs')


def check(config):
  """Parses the fields that take text, checks each field's choices and
  bounds and every rule across fields (a UsageError: exit 2), and sets the
  defaults that depend on other fields (--model, --learning_rate,
  --eval_fraction)."""
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if field.metadata.get('parse') and value is not None:
      value = field.metadata['parse'](value)
      object.__setattr__(config, field.name, value)
    check_field(field, value)
  if not config.model_dir:
    raise UsageError('--model_dir must be given')
  if config.model is None:
    object.__setattr__(config, 'model', default_model(config.structured))
  if config.learning_rate is None:
    object.__setattr__(config, 'learning_rate', default_learning_rate(config))
  if not isinstance(config.model, str) and not callable(config.model):
    raise UsageError('--model must be a name, MODULE:FUNCTION or a '
                     f'builder function, got {config.model!r}')
  if isinstance(config.model, str) and ':' not in config.model and (
      config.model not in MODEL_NAMES):  # Before any data is read.
    raise UsageError(f'--model must be one of {", ".join(MODEL_NAMES)} or '
                     f'MODULE:FUNCTION; got {config.model!r}')
  if config.eval_files and not config.train_files:
    raise UsageError('--eval_files needs --train_files')
  if config.train_files and not (config.eval_files or config.structured):
    raise UsageError('give both --train_files and --eval_files (images; '
                     'structured data can hold out --eval_fraction)')
  if config.eval_fraction is not None and (
      config.eval_files or not config.structured or
      config.eval_fraction >= 1):
    raise UsageError(
        f'--eval_fraction={config.eval_fraction}: a fraction below 1 of '
        'structured training files, for runs without --eval_files')
  for name in ('skip_rows_without_label', 'unreadable_as_missing'):
    if getattr(config, name) and not config.structured:
      raise UsageError(f'--{name} is for structured data (--feature_spec, '
                       'or CSV files)')
  if (config.structured and not config.eval_files and
      config.eval_fraction is None):
    object.__setattr__(config, 'eval_fraction', DEFAULT_EVAL_FRACTION)
  if config.feature_spec and not config.train_files:
    raise UsageError('--feature_spec needs --train_files')
  object.__setattr__(config, 'key_column', config.key_column or None)
  for name in ('predict_files', 'key_column'):  # (Structured: the record's.)
    if getattr(config, name) and not config.structured:
      raise UsageError(f'--{name} is for structured data: a model_dir of '
                       'such a run, or --feature_spec or CSV files')
  if config.predict_files and config.mode != 'predict':
    raise UsageError('--predict_files is for --mode=predict')
  if config.structured and config.model in ('cnn', 'resnet20'):
    raise UsageError(f'--model {config.model} is an image model: structured '
                     'data (--feature_spec, or CSV files) takes '
                     '--model=linear, dnn, wide_deep or MODULE:FUNCTION')
  if config.head and config.head != 'multiclass' and not config.structured:
    raise UsageError(f'--head={config.head} needs structured data '
                     '(--feature_spec, or CSV files); images are '
                     'multiclass')
  if config.head or not config.structured:  # Else the feature spec's head.
    check_head_flags(config, config.head or 'multiclass')
  if config.feature_spec:  # (Without one, a CSV's label is --label_key.)
    for field in dataclasses.fields(config):
      if field.name in IMAGE_FLAGS and (getattr(config, field.name) !=
                                        field.default):
        raise UsageError(f'--{field.name} is for images; this run\'s data '
                         'is structured (--feature_spec)')
  if config.data_source == 'idx' and not config.idx_dir:
    raise UsageError('--data_source=idx needs --idx_dir')
  if config.idx_dir and not os.path.isdir(config.idx_dir):
    raise UsageError(f'--idx_dir {config.idx_dir!r} is not a directory')
  if (config.batch_size_per_replica is not None and
      config.global_batch_size is not None):
    raise UsageError(
        'give --batch_size_per_replica or --global_batch_size, not both')
  if config.label_smoothing is not None and config.label_smoothing >= 1:
    raise UsageError(
        f'--label_smoothing must be < 1, got {config.label_smoothing}')
  if config.linear_learning_rate and not config.linear_optimizer:
    raise UsageError('--linear_learning_rate needs --linear_optimizer')
  config_optimizers.check_kwargs('optimizer_kwargs', config.optimizer,
                          config.optimizer_kwargs)
  config_optimizers.check_kwargs('linear_optimizer_kwargs', config.linear_optimizer,
                          config.linear_optimizer_kwargs)
  if config.ema_decay is not None and config.ema_decay >= 1:
    raise UsageError(f'--ema_decay must be < 1, got {config.ema_decay}')
  if config.train_steps is not None and config.train_epochs is not None:
    raise UsageError('give --train_steps or --train_epochs, not both')
  cluster_lib.check_strategy(config.cluster, config.strategy,
                             config.eval_strategy)
  _check_tf2_limits(config)
  if config.engine == 'estimator' and config.cluster and config.mode == 'train':
    # Estimator trains multi-worker only inside train_and_evaluate
    # (its distribute coordinator; tensorflow#46556).
    raise UsageError('in a TF_CONFIG cluster, train with '
                     '--mode=train_and_evaluate')
  if (config.engine == 'estimator' and config.precision != 'float32' and
      config.strategy == 'parameter_server'):
    # Keras refuses mixed_float16 under ParameterServerStrategyV1, and
    # its graph's fused bfloat16 convolutions have no CPU kernel.
    raise UsageError(f'--precision={config.precision}: --engine=estimator '
                     'trains in float32 under --strategy=parameter_server;'
                     ' use --engine=ctl or keras')
  # A model_dir, or a checkpoint: its prefix names no file but its index.
  if config.warm_start_from and not any(
      os.path.exists(path) for path in (
          config.warm_start_from, f'{config.warm_start_from}.index')) and (
              '://' not in config.warm_start_from):
    raise UsageError(f'--warm_start_from {config.warm_start_from!r} does not '
                     'exist')


def _check_tf2_limits(config):
  """What the TF2 engines cannot match of the estimator engine's."""
  if config.engine not in engines.TF2_ENGINES:
    return
  if config.eval_strategy != 'default':
    raise UsageError(f'--eval_strategy: --engine={config.engine} evaluates '
                     'under the training --strategy')
  if config.early_stopping_evals and config.cluster and (
      config.cluster.has_evaluator):
    raise UsageError(
        f'--early_stopping_evals: --engine={config.engine} stops on its own '
        'evaluations, which an evaluator task takes over (drop the '
        'evaluator, or use --engine=estimator)')


def default_learning_rate(config):
  """The rate of a run that gives none: its model's and data's."""
  linear = config.structured and config.model == STRUCTURED_MODEL
  return LINEAR_LEARNING_RATE if linear else DEFAULT_LEARNING_RATE


def min_structured_steps(model):
  """The floor of the steps of a structured run of `model` that gives no
  length: 10 epochs of a few hundred rows are far from converged."""
  return MIN_LINEAR_STEPS if model == STRUCTURED_MODEL else MIN_STRUCTURED_STEPS


def default_model(structured):
  """--model's default: STRUCTURED_MODEL on structured data, else cnn."""
  return STRUCTURED_MODEL if structured else 'cnn'


def check_head_flags(settings, head):
  """Fails unless each of HEAD_FLAGS that `settings` (a TrainConfig, or
  model_fn's params) gives is read by `head` (one of HEADS)."""
  for name, reader in HEAD_FLAGS.items():
    if getattr(settings, name) is not None and head != reader:
      raise UsageError(f'--{name} is for --head={reader}; this run\'s head '
                       f'is {head}')


def check_field(field, value):
  """A field's declared choices and bounds."""
  meta = field.metadata
  if value is None or not meta:
    return
  if meta.get('choices'):
    check_choice(field.name, value, meta['choices'])
  if meta.get('above') is not None and not value > meta['above']:
    raise UsageError(f'--{field.name} must be > {meta["above"]}, got {value}')
  if meta.get('at_least') is not None and not value >= meta['at_least']:
    raise UsageError(
        f'--{field.name} must be >= {meta["at_least"]}, got {value}')


def check_choice(name, value, choices):
  if value not in choices:
    raise UsageError(f'--{name} must be one of {", ".join(choices)}; got '
                     f'{value!r}')
