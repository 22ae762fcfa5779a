"""The one frozen configuration of a run: its fields, each with its flag's
help, choices and bounds (`config_flags.py` turns them into absl flags): one
source of defaults for the CLI, the `--config` file and the Python API. The
checks are config_checks.py's, what a run resolves config_resolved.py's."""

import dataclasses
import os
from typing import Any, Callable, Dict, Optional, Tuple, Union

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import config_checks
from estimator_trainer import config_data
from estimator_trainer import config_resolved
from estimator_trainer import deprecation
from estimator_trainer import engines
from estimator_trainer import stack
# Constants the fields' help names; tabular/ reads check_head_flags here.
from estimator_trainer.config_checks import (  # pylint: disable=unused-import
    DEFAULT_BATCH_SIZE_PER_REPLICA, DEFAULT_LEARNING_RATE,
    DEFAULT_TRAIN_EPOCHS, IMAGE_LABEL_SMOOTHING, LINEAR_LEARNING_RATE,
    MIN_LINEAR_STEPS, MIN_STRUCTURED_STEPS, STRUCTURED_MODEL,
    check_head_flags)
from estimator_trainer.config_optimizers import OPTIMIZER_KWARGS, OPTIMIZERS
# A field with its flag's help, choices, bounds and parser (config_checks).
_option = config_checks.option


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
      'vary in size).', parse=config_checks.ints('image_size', 2))
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
      parse=config_checks.json_object)
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
  train_files: Optional[str] = config_data.TRAIN_FILES
  eval_files: Optional[str] = config_data.EVAL_FILES
  eval_fraction: Optional[float] = config_data.EVAL_FRACTION
  validation_fraction: Optional[float] = config_data.VALIDATION_FRACTION
  skip_rows_without_label: bool = config_data.SKIP_ROWS_WITHOUT_LABEL
  unreadable_as_missing: bool = config_data.UNREADABLE_AS_MISSING
  feature_spec: Optional[str] = config_data.FEATURE_SPEC
  head: Optional[str] = config_data.HEAD
  huber_delta: Optional[float] = config_data.HUBER_DELTA
  image_key: str = _option('image', 'tf.Example key of the image in '
                           'TFRecords: raw uint8 bytes or PNG/JPEG '
                           '(TF-Slim: image/encoded).')
  label_key: str = _option(config_checks.DEFAULT_LABEL_KEY,
                           'tf.Example key of the int64 label '
                           '(TF-Slim: image/class/label); CSV files without '
                           '--feature_spec: the label column.')
  image_shape: Optional[Tuple[int, int, int]] = _option(
      None, 'HEIGHT,WIDTH,CHANNELS of TFRecord images, instead of the '
      'dataset_spec.json file beside them.', parse=config_checks.ints('image_shape', 3))
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
  optimizer_kwargs: Optional[Dict[str, Any]] = _option(
      None, "JSON object of --optimizer's further parameters, by Keras's "
      'names: ' + '; '.join(f'{name} {", ".join(keys)}' for name, keys in
                            OPTIMIZER_KWARGS.items()),
      parse=config_checks.json_object_of('optimizer_kwargs'))
  linear_optimizer_kwargs: Optional[Dict[str, Any]] = _option(
      None, '--optimizer_kwargs of --linear_optimizer.',
      parse=config_checks.json_object_of('linear_optimizer_kwargs'))
  lr_decay: str = _option(
      'cosine', 'cosine: decay --learning_rate to 0 over the training steps; '
      'none: constant. ftrl keeps a constant rate, as canned Estimators '
      'do.', choices=('cosine', 'none'))
  weight_decay: Optional[float] = _option(
      None, 'L2 regularization factor (x the sum of the kernels\' squares). '
      'Default 0, but for structured data\'s linear model the prior of '
      'LogisticRegression\'s and Ridge\'s defaults: 1/(2n) for n training '
      'examples (regression: the label\'s variance/n), and for its dnn and '
      'wide_deep 10 x that, at least the prior of 50 examples, at most '
      '100 x it.', at_least=0)
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
      f'at least {MIN_LINEAR_STEPS} steps for the linear model, '
      f'{MIN_STRUCTURED_STEPS} for the others; where that floor binds, dnn '
      'and wide_deep choose 1, 2 or 4 times it by 5-fold cross-validation '
      'on the training records: docs/guide/tabular.md).', above=0)
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
  predict_files: Optional[str] = config_data.PREDICT_FILES
  key_column: Optional[str] = config_data.KEY_COLUMN
  cluster_timeout_secs: int = _option(
      600, 'In a TF_CONFIG cluster, fail when no training step (evaluator and '
      'ps: no new checkpoint) completes for this long: a peer never started '
      'or died.', above=0)
  cluster: Optional[cluster_lib.Cluster] = None
  # Last: a new field keeps the others' positions (the public API).
  cv_fold: Optional[Tuple[int, int]] = config_data.CV_FOLD

  @classmethod
  def from_environment(cls, **values):
    """The config of `values` in the cluster that TF_CONFIG describes (as
    TensorFlow reads it); without TF_CONFIG, no cluster."""
    return cls(**values, cluster=cluster_lib.from_environment())

  # The checks and what the config resolves to, each in its own module.
  def __post_init__(self):
    config_checks.check(self)
    config_data.check(self)

  structured = property(config_resolved.structured)
  resolved_predictions_file = property(
      config_resolved.resolved_predictions_file)
  resolve_global_batch_size = config_resolved.resolve_global_batch_size
  resolve_train_steps = config_resolved.resolve_train_steps
  model_params = config_resolved.model_params
  describe = config_resolved.describe


# Names that moved out of this module, kept for one release.
__getattr__ = deprecation.moved_names(__name__, {'ModelParams': (
    'estimator_trainer.estimator.params.ModelParams', '0.3.0')})
