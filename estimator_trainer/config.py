"""The one frozen configuration of a run; every check of user input is here.

Each field carries its flag's help, choices and bounds (`config_flags.py`
turns them into absl flags): one source of defaults for the CLI, the
`--config` file and the Python API.
"""

import dataclasses
import json
import math
import os
from typing import Any, Callable, Dict, Optional, Tuple, Union

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import deprecation
from estimator_trainer import engines
from estimator_trainer import layout
from estimator_trainer import stack
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
# steps reach LogisticRegression's fit on the real tables of
# docs/guide/tabular.md, where 2e-3 fell short (oj); canned Estimators also
# give the linear model a larger rate than the DNN (0.2 against 0.05).
LINEAR_LEARNING_RATE = 1e-2
MIN_STRUCTURED_STEPS = 2000
TRAINING_MODES = ('train_and_evaluate', 'train')
# What structured data's logits mean (heads.py).
HEADS = ('multiclass', 'binary', 'multilabel', 'regression')
# The --optimizer and --linear_optimizer choices (optimizers.py builds them).
OPTIMIZERS = ('adam', 'sgd', 'adagrad', 'ftrl')
# The optimizers whose rate --lr_decay leaves constant: FTRL's weights are a
# closed form of its accumulators over the current rate, so a cosine to 0
# would end them at 0 (canned Estimators keep its rate constant too).
CONSTANT_RATE_OPTIMIZERS = ('ftrl',)
# The flags that only one head reads (heads.py) -> that head: given to a run
# of another head, a usage error, never shown as applied.
HEAD_FLAGS = {'label_smoothing': 'multiclass', 'huber_delta': 'regression'}
# The part of structured training files held out to evaluate on when no
# --eval_files are given (the baselines' 80/20 split in docs/guide/tabular.md).
DEFAULT_EVAL_FRACTION = 0.2

# The flags of image data, which structured data (--feature_spec) does not
# read: given with it, a usage error.
IMAGE_FLAGS = ('image_size', 'augment', 'image_key', 'label_key',
               'image_shape', 'num_classes')
# The image recipe's label smoothing (docs/guide/command-line.md); structured
# data's heads smooth nothing unless asked, as canned Estimators' heads.
IMAGE_LABEL_SMOOTHING = 0.1


def _option(default, help, choices=None, above=None, at_least=None,  # pylint: disable=redefined-builtin
            parse=None):
  """A field with its flag's help; `choices`, `above` (>) and `at_least`
  (>=) are checked on construction. `parse` turns the flag's text (or a
  --config file's value) into the field's value."""
  return dataclasses.field(default=default, metadata=dict(
      help=help, choices=choices, above=above, at_least=at_least,
      parse=parse))


def _ints(name, count):
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


def _json_object(value):
  if isinstance(value, str):
    try:
      value = json.loads(value)
    except ValueError as e:
      raise UsageError(f'--model_kwargs: not JSON ({e})') from None
  if not isinstance(value, dict):
    raise UsageError(f'--model_kwargs must be a JSON object, got {value!r}')
  return value


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Everything a run needs, validated on construction.

  Batch: give `batch_size_per_replica` or `global_batch_size`, not both; with
  neither, 64 per replica. Length: `train_steps` or `train_epochs`, not both;
  with neither, 10 epochs. `cluster` is this process's place in a TF_CONFIG
  cluster: None unless given, or read by `from_environment`.
  """

  model_dir: str = dataclasses.field(metadata=dict(
      help='Where checkpoints, events, metrics.json and predictions go.',
      flag_default=os.path.join('/tmp', 'estimator_trainer')))
  mode: str = _option('train_and_evaluate', 'What to run.',
                      choices=engines.MODES)
  engine: str = _option(
      stack.default_engine(),
      'estimator (tf.estimator), ctl (TF2 custom training loop: strategy.run) '
      'or keras (Model.fit); the same data, model and loss. Default: '
      'estimator, or ctl on TensorFlow 2.16+ (no tf.estimator).',
      choices=tuple(engines.ENGINES))
  dataset: str = _option(
      'fashion_mnist',
      'TFDS name of an image-classification dataset (an `image` and a '
      'ClassLabel `label` feature): fashion_mnist, mnist, cifar10, ...')
  train_split: str = _option(
      'train', 'TFDS split to train on; slicing allowed: train[:90%].')
  eval_split: str = _option(
      'test', 'TFDS split to evaluate and predict on: test, train[90%:], ...')
  image_size: Optional[Tuple[int, int]] = _option(
      None, 'HEIGHT,WIDTH: resize every image (TFDS datasets whose images '
      'vary in size).', parse=_ints('image_size', 2))
  augment: str = _option(
      'none', 'crop_flip: pad 4, random crop back and random horizontal flip '
      '(training only, the CIFAR standard).', choices=('none', 'crop_flip'))
  # In the Python API also the builder itself (a callable).
  model: Union[str, Callable[..., Any], None] = _option(
      None, 'Images: cnn (the default, the seeds\' CNN), resnet20 (the CIFAR '
      'ResNet-20) or MODULE:FUNCTION, your builder: FUNCTION(input_shape, '
      'num_classes, **model_kwargs) returning an uncompiled tf.keras.Model '
      'from float32 images to float32 logits. Structured data: '
      f'{STRUCTURED_MODEL} (the default), dnn, wide_deep or MODULE:FUNCTION '
      '(FUNCTION(inputs, logits_dimension, **model_kwargs)).')
  model_kwargs: Optional[Dict[str, Any]] = _option(
      None, 'JSON object of keyword arguments for the --model builder.',
      parse=_json_object)
  sync_batch_norm: bool = _option(
      False, 'Batch norm statistics over all replicas (resnet20, or a builder '
      'taking sync_batch_norm): 1 and N replicas then train alike.')
  bn_recompute_batches: int = _option(
      0, 'Before each checkpoint save in training, recompute every batch-norm '
      'layer\'s moving mean and variance as the population statistics of '
      'this many training batches (precise BN), so that evaluation and '
      'export use statistics that are right whatever the momentum; 0: off.',
      at_least=0)
  data_source: str = _option(
      'auto',
      'tfds, idx, or auto: IDX files when --idx_dir is given (or Debian\'s '
      '/usr/share/datasets/fashion-mnist is installed), else TFDS.',
      choices=('auto', 'tfds', 'idx'))
  data_dir: Optional[str] = _option(None,
                                    'TFDS data_dir (TFDS default if unset).')
  idx_dir: Optional[str] = _option(
      None, 'Directory of the original IDX files (train-images-idx3-ubyte.gz, '
      '...).')
  train_files: Optional[str] = _option(
      None,
      'Glob of TFRecord files of tf.Example (--image_key, --label_key) to '
      'train on, instead of --dataset; needs --eval_files. With '
      '--feature_spec: structured data, CSV files with a header row '
      '(.csv, .csv.gz) or TFRecords of tf.Example keyed by column; without '
      '--eval_files, --eval_fraction of them is held out.')
  eval_files: Optional[str] = _option(
      None, 'Glob of files to evaluate and predict on.')
  eval_fraction: Optional[float] = _option(
      None, 'Without --eval_files: evaluate (and predict) '
      'on this fraction of the training files\' records, chosen by a hash of '
      f'each record and left out of training; default {DEFAULT_EVAL_FRACTION}.',
      above=0)
  skip_rows_without_label: bool = _option(
      False, 'Leave out the records whose label is missing (an empty cell, '
      'an absent feature), from training, evaluation and the statistics, '
      'and log how many; without it such a record is an error naming it.')
  feature_spec: Optional[str] = _option(
      None, 'The JSON (or YAML) file of the columns\' '
      'kinds, crosses, label and weight column (`python -m '
      'estimator_trainer.tabular.infer` writes one from the data). Without '
      'it, CSV training files\' spec is inferred as that command does (the '
      'label: --label_key), printed and stored in the model_dir.')
  head: Optional[str] = _option(
      None, 'multiclass (softmax cross-entropy), binary '
      '(sigmoid cross-entropy), multilabel (sigmoid cross-entropy per label) '
      'or regression (squared error); default: the feature spec\'s. Images '
      'are multiclass.', choices=HEADS)
  huber_delta: Optional[float] = _option(
      None, '--head=regression: Huber loss with this delta instead of the '
      'squared error.', above=0)
  image_key: str = _option('image', 'tf.Example key of the image in '
                           'TFRecords: raw uint8 bytes or PNG/JPEG '
                           '(TF-Slim: image/encoded).')
  label_key: str = _option('label', 'tf.Example key of the int64 label '
                           '(TF-Slim: image/class/label); CSV files without '
                           '--feature_spec: the label column.')
  image_shape: Optional[Tuple[int, int, int]] = _option(
      None, 'HEIGHT,WIDTH,CHANNELS of TFRecord images, instead of the '
      'dataset_spec.json file beside them.', parse=_ints('image_shape', 3))
  num_classes: Optional[int] = _option(
      None, 'Classes of TFRecord labels, instead of the '
      'dataset_spec.json file beside them.', above=1)
  strategy: str = _option('default',
                          'Training strategy (default: no strategy).',
                          choices=engines.STRATEGIES)
  eval_strategy: str = _option('default', 'Evaluation strategy.',
                               choices=engines.STRATEGIES)
  communication: str = _option(
      'auto', 'multi_worker_mirrored all-reduce.',
      choices=('auto', 'ring', 'nccl'))
  cpu_replicas: int = _option(
      0, 'Split the CPU into this many logical devices so that mirrored runs '
      'that many replicas without GPUs (0: no split).', at_least=0)
  intra_op_threads: int = _option(
      0, 'Threads one op (a convolution) may use; 0: TensorFlow\'s choice '
      '(all cores). With --cpu_replicas=<cores>, 1 runs each replica on a '
      'core.', at_least=0)
  inter_op_threads: int = _option(
      0, 'Ops run at once; 0: TensorFlow\'s choice.', at_least=0)
  batch_size_per_replica: Optional[int] = _option(
      None, f'Per-replica batch (default {DEFAULT_BATCH_SIZE_PER_REPLICA}).',
      above=0)
  global_batch_size: Optional[int] = _option(
      None, 'Global batch instead of --batch_size_per_replica; must divide by '
      'the replica count.', above=0)
  optimizer: str = _option(
      'adam', 'The optimizer: adam, sgd, or the canned Estimators\' '
      'defaults, adagrad (DNNs) and ftrl (linear models), whose updates of '
      'large embeddings touch only the rows a batch looks up.',
      choices=OPTIMIZERS)
  learning_rate: Optional[float] = _option(
      None, f'Learning rate; default {DEFAULT_LEARNING_RATE}, but '
      f'{LINEAR_LEARNING_RATE} for structured data\'s linear model (a '
      'convex fit, regularized: see --weight_decay).', above=0)
  linear_optimizer: Optional[str] = _option(
      None, 'An optimizer for the wide part of --model=wide_deep, as canned '
      'DNNLinearCombined Estimators\' linear_optimizer (they default to ftrl '
      'for it, adagrad for the deep part); --optimizer trains the rest.',
      choices=OPTIMIZERS)
  linear_learning_rate: Optional[float] = _option(
      None, "The wide part's learning rate with --linear_optimizer "
      '(default: --learning_rate), on the same schedule (ftrl: constant).',
      above=0)
  lr_decay: str = _option(
      'cosine', 'cosine: decay --learning_rate to 0 over the training steps; '
      'none: constant. ftrl keeps a constant rate, as canned Estimators '
      'do.', choices=('cosine', 'none'))
  weight_decay: Optional[float] = _option(
      None, 'L2 regularization factor (x the sum of the kernels\' squares). '
      'Default 0, but for structured data\'s linear model the prior of '
      'LogisticRegression\'s and Ridge\'s defaults: 1/(2n) for n training '
      'examples (regression: the label\'s variance/n).', at_least=0)
  clip_global_norm: Optional[float] = _option(
      None, 'Clip the gradient of the global batch to this global norm, '
      'after the replicas\' gradients are summed (so a step is the same on '
      'any number of replicas); its norm before clipping is the '
      'gradient_norm summary.', above=0)
  accumulate_steps: int = _option(
      1, 'Micro-batches per optimizer step: each step reads this many '
      'batches (of --batch_size_per_replica per replica) and applies the sum '
      'of their gradients, as one step on a batch this many times larger. '
      'Steps, the schedule, checkpoints and summaries count optimizer '
      'steps; no checkpoint falls mid-accumulation. Batch norm updates its '
      'moving statistics on every micro-batch.',
      at_least=1)
  ema_decay: Optional[float] = _option(
      None, 'Evaluate, export and report an exponential moving average of '
      'the weights (and batch norm statistics), updated after every step '
      'with this decay in (0, 1), e.g. 0.999; the raw weights train.',
      above=0)
  label_smoothing: Optional[float] = _option(
      None, 'Label smoothing of the multiclass training loss, in [0, 1); '
      f'default {IMAGE_LABEL_SMOOTHING} for images, 0 for structured data '
      '(as canned Estimators\' heads). Evaluation reports the plain '
      'cross-entropy.', at_least=0)
  precision: str = _option(
      'float32',
      'float32, or mixed_bfloat16: compute in bfloat16 with float32 variables '
      '(faster only on CPUs with bfloat16 instructions, e.g. AVX512_BF16, '
      'AMX), or mixed_float16: compute in float16 (GPUs) with dynamic loss '
      'scaling (a step whose gradients overflow is skipped).',
      choices=('float32', 'mixed_bfloat16', 'mixed_float16'))
  train_steps: Optional[int] = _option(None, 'Global steps to train to.',
                                       above=0)
  train_epochs: Optional[float] = _option(
      None, f'Epochs to train instead of --train_steps (default '
      f'{DEFAULT_TRAIN_EPOCHS}; structured data: {DEFAULT_TRAIN_EPOCHS}, but '
      f'at least {MIN_STRUCTURED_STEPS} steps).', above=0)
  shuffle_buffer: int = _option(
      60000, 'Shuffle buffer in examples; 0 turns shuffling off.', at_least=0)
  seed: int = _option(42, 'Seed of weights, shuffling and ops.')
  steps_per_loop: int = _option(
      100, 'Training steps per session.run (estimator engine, without a '
      'strategy or with one_device) or per tf.function call (ctl, keras); '
      'runs end on checkpoint, summary and log steps and on the last step.',
      above=0)
  save_checkpoints_steps: int = _option(
      1000, 'Checkpoint (and so evaluation) cadence in steps.', above=0)
  save_summary_steps: int = _option(100, 'TensorBoard summary cadence in '
                                    'steps.', above=0)
  log_step_count_steps: int = _option(
      100, 'Log loss and steps/sec every this many steps.', above=0)
  keep_checkpoint_max: int = _option(5, 'Checkpoints to keep.', above=0)
  throttle_secs: int = _option(
      60, 'train_and_evaluate: evaluate a new checkpoint at most this often.',
      at_least=0)
  export: str = _option(
      'final',
      'SavedModels under <model_dir>/export/<name>/<timestamp>: final (after '
      'the last evaluation), latest (after every evaluation), best (highest '
      'eval accuracy so far) or none.',
      choices=('final', 'latest', 'best', 'none'))
  exports_to_keep: int = _option(
      5, '--export=latest or best: how many of its SavedModels to keep (the '
      'newest), in every engine.', above=0)
  early_stopping_evals: int = _option(
      0, 'Stop training when eval accuracy has not improved for this many '
      'evaluations (0: never).', at_least=0)
  warm_start_from: Optional[str] = _option(
      None, 'Initialize from this checkpoint or model_dir (fine-tuning).')
  warm_start_vars: str = _option(
      '.*', 'Regex of the variables to warm-start, e.g. "^(?!logits/)" for '
      'all but the last layer.')
  num_predictions: int = _option(
      10, '--mode predict: how many test examples to predict.', above=0)
  predictions_file: Optional[str] = _option(
      None, '--mode predict output (default <model_dir>/predictions.jsonl).')
  cluster_timeout_secs: int = _option(
      600, 'In a TF_CONFIG cluster, fail when no training step (evaluator and '
      'ps: no new checkpoint) completes for this long: a peer never started '
      'or died.', above=0)
  cluster: Optional[cluster_lib.Cluster] = None

  @property
  def structured(self):
    """Whether the run is on structured data: a --feature_spec, or CSV
    training files (whose spec is then inferred, the label --label_key)."""
    return bool(self.feature_spec) or bool(self.train_files) and all(
        pattern.strip().endswith(CSV_SUFFIXES)
        for pattern in self.train_files.split(','))

  @classmethod
  def from_environment(cls, **values):
    """The config of `values` in the cluster that TF_CONFIG describes (as
    TensorFlow reads it); without TF_CONFIG, no cluster."""
    return cls(**values, cluster=cluster_lib.from_environment())

  def __post_init__(self):
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if field.metadata.get('parse') and value is not None:
        value = field.metadata['parse'](value)
        object.__setattr__(self, field.name, value)
      _check_field(field, value)
    if not self.model_dir:
      raise UsageError('--model_dir must be given')
    if self.model is None:
      object.__setattr__(self, 'model', default_model(self.structured))
    if self.learning_rate is None:
      object.__setattr__(self, 'learning_rate', LINEAR_LEARNING_RATE if (
          self.structured and self.model == STRUCTURED_MODEL) else
                         DEFAULT_LEARNING_RATE)
    if not isinstance(self.model, str) and not callable(self.model):
      raise UsageError('--model must be a name, MODULE:FUNCTION or a '
                       f'builder function, got {self.model!r}')
    if self.eval_files and not self.train_files:
      raise UsageError('--eval_files needs --train_files')
    if self.train_files and not (self.eval_files or self.structured):
      raise UsageError('give both --train_files and --eval_files (images; '
                       'structured data can hold out --eval_fraction)')
    if self.eval_fraction is not None and (
        self.eval_files or not self.structured or self.eval_fraction >= 1):
      raise UsageError(
          f'--eval_fraction={self.eval_fraction}: a fraction below 1 of '
          'structured training files, for runs without --eval_files')
    if self.skip_rows_without_label and not self.structured:
      raise UsageError('--skip_rows_without_label is for structured data '
                       '(--feature_spec, or CSV files)')
    if self.structured and not self.eval_files and self.eval_fraction is None:
      object.__setattr__(self, 'eval_fraction', DEFAULT_EVAL_FRACTION)
    if self.feature_spec and not self.train_files:
      raise UsageError('--feature_spec needs --train_files')
    if self.structured and self.model in ('cnn', 'resnet20'):
      raise UsageError(f'--model {self.model} is an image model: structured '
                       'data (--feature_spec, or CSV files) takes '
                       '--model=linear, dnn, wide_deep or MODULE:FUNCTION')
    if self.head and self.head != 'multiclass' and not self.structured:
      raise UsageError(f'--head={self.head} needs structured data '
                       '(--feature_spec, or CSV files); images are '
                       'multiclass')
    if self.head or not self.structured:  # Else the feature spec's head.
      check_head_flags(self, self.head or 'multiclass')
    if self.feature_spec:  # (Without one, a CSV's label is --label_key.)
      for field in dataclasses.fields(self):
        if field.name in IMAGE_FLAGS and (getattr(self, field.name) !=
                                          field.default):
          raise UsageError(f'--{field.name} is for images; this run\'s data '
                           'is structured (--feature_spec)')
    if self.data_source == 'idx' and not self.idx_dir:
      raise UsageError('--data_source=idx needs --idx_dir')
    if self.idx_dir and not os.path.isdir(self.idx_dir):
      raise UsageError(f'--idx_dir {self.idx_dir!r} is not a directory')
    if (self.batch_size_per_replica is not None and
        self.global_batch_size is not None):
      raise UsageError(
          'give --batch_size_per_replica or --global_batch_size, not both')
    if self.label_smoothing is not None and self.label_smoothing >= 1:
      raise UsageError(
          f'--label_smoothing must be < 1, got {self.label_smoothing}')
    if self.linear_learning_rate and not self.linear_optimizer:
      raise UsageError('--linear_learning_rate needs --linear_optimizer')
    if self.ema_decay is not None and self.ema_decay >= 1:
      raise UsageError(f'--ema_decay must be < 1, got {self.ema_decay}')
    if self.train_steps is not None and self.train_epochs is not None:
      raise UsageError('give --train_steps or --train_epochs, not both')
    cluster_lib.check_strategy(self.cluster, self.strategy, self.eval_strategy)
    self._check_tf2_limits()
    if self.engine == 'estimator' and self.cluster and self.mode == 'train':
      # Estimator trains multi-worker only inside train_and_evaluate
      # (its distribute coordinator; tensorflow#46556).
      raise UsageError('in a TF_CONFIG cluster, train with '
                       '--mode=train_and_evaluate')
    if (self.engine == 'estimator' and self.precision != 'float32' and
        self.strategy == 'parameter_server'):
      # Keras refuses mixed_float16 under ParameterServerStrategyV1, and
      # its graph's fused bfloat16 convolutions have no CPU kernel.
      raise UsageError(f'--precision={self.precision}: --engine=estimator '
                       'trains in float32 under --strategy=parameter_server;'
                       ' use --engine=ctl or keras')
    if self.warm_start_from and not os.path.exists(self.warm_start_from) and (
        '://' not in self.warm_start_from):
      raise UsageError(f'--warm_start_from {self.warm_start_from!r} does not '
                       'exist')

  def _check_tf2_limits(self):
    """What the TF2 engines cannot match of the estimator engine's."""
    if self.engine not in engines.TF2_ENGINES:
      return
    if self.eval_strategy != 'default':
      raise UsageError(f'--eval_strategy: --engine={self.engine} evaluates '
                       'under the training --strategy')
    if self.early_stopping_evals and self.cluster and (
        self.cluster.has_evaluator):
      raise UsageError(
          f'--early_stopping_evals: --engine={self.engine} stops on its own '
          'evaluations, which an evaluator task takes over (drop the '
          'evaluator, or use --engine=estimator)')

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
    default; structured data: at least MIN_STRUCTURED_STEPS): each reads
    `accumulate_steps` global batches."""
    if self.train_steps is not None:
      return self.train_steps
    epochs = self.train_epochs or DEFAULT_TRAIN_EPOCHS
    steps = max(1, math.ceil(epochs * num_train_examples /
                             (global_batch_size * self.accumulate_steps)))
    if self.structured and not self.train_epochs:
      return max(steps, MIN_STRUCTURED_STEPS)
    return steps

  @property
  def resolved_predictions_file(self) -> str:
    return self.predictions_file or layout.predictions_file(self.model_dir)

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
    described = {'mode', 'engine', 'strategy', 'model', 'model_kwargs',
                 'dataset', 'train_files', 'eval_files', 'eval_fraction',
                 'skip_rows_without_label', 'feature_spec', 'data_source', 'idx_dir', 'batch_size_per_replica', 'global_batch_size',
                 'train_steps', 'train_epochs', 'cluster'}
    others = [f'{field.name}={getattr(self, field.name)!r}'
              for field in dataclasses.fields(self)
              if field.name not in described and
              getattr(self, field.name) != field.default]
    if others:
      parts.append(', '.join(others))
    if self.lr_decay == 'cosine' and set(CONSTANT_RATE_OPTIMIZERS) & {
        self.optimizer, self.linear_optimizer}:
      parts.append(f'{", ".join(CONSTANT_RATE_OPTIMIZERS)} keeps a constant '
                   'rate, as canned Estimators do')
    return '; '.join(parts)


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


def label_smoothing_of(label_smoothing, images):
  """The label smoothing a multiclass head applies: `label_smoothing` if
  given, else IMAGE_LABEL_SMOOTHING for `images`, 0 for structured data."""
  if label_smoothing is None:
    return IMAGE_LABEL_SMOOTHING if images else 0.0
  return label_smoothing


def weight_decay_of(config, spec):
  """The L2 factor of `config`'s run on data of `spec`: --weight_decay if
  given, else for STRUCTURED_MODEL the spec's `prior_weight_decay` (the
  linear model then fits what LogisticRegression or Ridge fits), else 0."""
  if config.weight_decay is not None:
    return config.weight_decay
  prior = getattr(spec, 'prior_weight_decay', None)
  return prior if prior and config.model == STRUCTURED_MODEL else 0.0


def _check_field(field, value):
  """A field's declared choices and bounds."""
  meta = field.metadata
  if value is None or not meta:
    return
  if meta.get('choices'):
    _check_choice(field.name, value, meta['choices'])
  if meta.get('above') is not None and not value > meta['above']:
    raise UsageError(f'--{field.name} must be > {meta["above"]}, got {value}')
  if meta.get('at_least') is not None and not value >= meta['at_least']:
    raise UsageError(
        f'--{field.name} must be >= {meta["at_least"]}, got {value}')


def _check_choice(name, value, choices):
  if value not in choices:
    raise UsageError(f'--{name} must be one of {", ".join(choices)}; got '
                     f'{value!r}')


def __getattr__(name):
  """Names that moved out of this module, kept for one release."""
  if name == 'ModelParams':
    deprecation.warn('estimator_trainer.config.ModelParams',
                     'estimator_trainer.estimator.params.ModelParams',
                     removed_in='0.3.0')
    return deprecation.moved_to(
        'estimator_trainer.estimator.params.ModelParams')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
