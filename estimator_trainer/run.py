"""Command line: `python -m estimator_trainer.run --model_dir DIR [flags]`.

Trains the CNN on Fashion-MNIST or MNIST with tf.estimator and writes
checkpoints, TensorBoard events and `metrics.json` to `--model_dir`.
Exit codes: 0 success, 1 runtime error, 2 usage error.
"""

import json
import os
import warnings

# google-api-core (pulled in by the tfx extra) warns about Python 3.11 on
# every start; it says nothing about this run.
warnings.filterwarnings('ignore', category=FutureWarning,
                        module=r'google\.api_core\.')

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags
from absl import logging

from estimator_trainer import config as config_lib
from estimator_trainer import console
from estimator_trainer import engines
from estimator_trainer import listen
from estimator_trainer import errors
from estimator_trainer.errors import TrainerError, UsageError

_DEFAULTS = config_lib.TrainConfig.__dataclass_fields__

flags.DEFINE_string(
    'model_dir', os.path.join('/tmp', 'estimator_trainer'),
    'Where checkpoints, events, metrics.json and predictions go.')
flags.DEFINE_string('job_dir', None,
                    'Alias of --model_dir (AI Platform convention).')
flags.DEFINE_string(
    'config', None,
    'JSON or YAML file of flag values ({"learning_rate": 0.01, ...}); flags '
    'given on the command line override it.')
flags.DEFINE_string('mode', _DEFAULTS['mode'].default,
                    f'One of: {", ".join(engines.MODES)}.')
flags.DEFINE_string(
    'engine', _DEFAULTS['engine'].default,
    'estimator (tf.estimator), ctl (TF2 custom training loop: strategy.run) '
    'or keras (Model.fit); the same data, model and loss.')
flags.DEFINE_string('dataset', _DEFAULTS['dataset'].default,
                    f'TFDS name, one of: {", ".join(config_lib.DATASETS)}.')
flags.DEFINE_string(
    'data_source', 'auto',
    'tfds, idx, or auto: IDX files when --idx_dir is given (or Debian\'s '
    '/usr/share/datasets/fashion-mnist is installed), else TFDS.')
flags.DEFINE_string('data_dir', None, 'TFDS data_dir (TFDS default if unset).')
flags.DEFINE_string(
    'idx_dir', None,
    'Directory of the original IDX files (train-images-idx3-ubyte.gz, ...).')
flags.DEFINE_string(
    'train_files', None,
    'Glob of TFRecord files of tf.Example (image: 784 raw uint8 bytes, '
    'label: int64) to train on, instead of --dataset; needs --eval_files.')
flags.DEFINE_string('eval_files', None,
                    'Glob of TFRecord files to evaluate and predict on.')
flags.DEFINE_string(
    'strategy', 'default',
    f'Training strategy, one of: {", ".join(engines.STRATEGIES)} '
    '(default: no strategy).')
flags.DEFINE_string('eval_strategy', 'default',
                    'Evaluation strategy, same choices as --strategy.')
flags.DEFINE_string(
    'communication', 'auto',
    'multi_worker_mirrored all-reduce: auto, ring or nccl.')
flags.DEFINE_integer(
    'cpu_replicas', 0,
    'Split the CPU into this many logical devices so that mirrored runs that '
    'many replicas without GPUs (0: no split).')
flags.DEFINE_integer(
    'intra_op_threads', 0,
    'Threads one op (a convolution) may use; 0: TensorFlow\'s choice (all '
    'cores). With --cpu_replicas=<cores>, 1 runs each replica on a core.')
flags.DEFINE_integer(
    'inter_op_threads', 0,
    'Ops run at once; 0: TensorFlow\'s choice.')
flags.DEFINE_integer(
    'batch_size_per_replica', None,
    f'Per-replica batch (default {config_lib.DEFAULT_BATCH_SIZE_PER_REPLICA}).')
flags.DEFINE_integer(
    'global_batch_size', None,
    'Global batch instead of --batch_size_per_replica; must divide by the '
    'replica count.')
flags.DEFINE_string('optimizer', 'adam', 'adam or sgd.')
flags.DEFINE_float('learning_rate', _DEFAULTS['learning_rate'].default,
                   'Learning rate.')
flags.DEFINE_string(
    'lr_decay', 'cosine',
    'cosine: decay --learning_rate to 0 over the training steps; none: '
    'constant.')
flags.DEFINE_float('weight_decay', 0.0, 'L2 regularization factor.')
flags.DEFINE_string(
    'precision', 'float32',
    'float32, or mixed_bfloat16: compute in bfloat16 with float32 variables '
    '(faster only on CPUs with bfloat16 instructions, e.g. AVX512_BF16, AMX).')
flags.DEFINE_integer('train_steps', None, 'Global steps to train to.')
flags.DEFINE_float(
    'train_epochs', None,
    f'Epochs to train instead of --train_steps (default '
    f'{config_lib.DEFAULT_TRAIN_EPOCHS}).')
flags.DEFINE_integer('shuffle_buffer', _DEFAULTS['shuffle_buffer'].default,
                     'Shuffle buffer in examples; 0 turns shuffling off.')
flags.DEFINE_integer('seed', _DEFAULTS['seed'].default,
                     'Seed of weights, shuffling and ops.')
flags.DEFINE_integer(
    'steps_per_loop', _DEFAULTS['steps_per_loop'].default,
    'ctl and keras engines: training steps per tf.function call.')
flags.DEFINE_integer('save_checkpoints_steps',
                     _DEFAULTS['save_checkpoints_steps'].default,
                     'Checkpoint (and so evaluation) cadence in steps.')
flags.DEFINE_integer('save_summary_steps',
                     _DEFAULTS['save_summary_steps'].default,
                     'TensorBoard summary cadence in steps.')
flags.DEFINE_integer('log_step_count_steps',
                     _DEFAULTS['log_step_count_steps'].default,
                     'Log loss and steps/sec every this many steps.')
flags.DEFINE_integer('keep_checkpoint_max',
                     _DEFAULTS['keep_checkpoint_max'].default,
                     'Checkpoints to keep.')
flags.DEFINE_integer(
    'throttle_secs', _DEFAULTS['throttle_secs'].default,
    'train_and_evaluate: evaluate a new checkpoint at most this often.')
flags.DEFINE_string(
    'export', 'final',
    'SavedModels under <model_dir>/export/<name>/<timestamp>: final (after '
    'the last evaluation), latest (after every evaluation), best (highest '
    'eval accuracy so far) or none.')
flags.DEFINE_integer(
    'early_stopping_evals', 0,
    'Stop training when eval accuracy has not improved for this many '
    'evaluations (0: never).')
flags.DEFINE_string(
    'warm_start_from', None,
    'Initialize from this checkpoint or model_dir (fine-tuning).')
flags.DEFINE_string(
    'warm_start_vars', '.*',
    'Regex of the variables to warm-start, e.g. "^(?!logits/)" for all but '
    'the last layer.')
flags.DEFINE_integer('num_predictions', _DEFAULTS['num_predictions'].default,
                     '--mode predict: how many test images to predict.')
flags.DEFINE_string('predictions_file', None,
                    '--mode predict output (default '
                    '<model_dir>/predictions.jsonl).')

flags.DEFINE_integer(
    'cluster_timeout_secs', 600,
    'In a TF_CONFIG cluster, fail when no training step (evaluator and ps: '
    'no new checkpoint) completes for this long: a peer never started or '
    'died.')

flags.DEFINE_bool(
    'listen_all_interfaces', False,
    'In a TF_CONFIG cluster, let this task\'s gRPC server listen on every '
    'interface, as TensorFlow does, instead of only on its TF_CONFIG address '
    '(needed when that address is not the machine\'s own, e.g. a NAT).')

FLAGS = flags.FLAGS


def _apply_config_file(path):
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
    if name not in FLAGS or name == 'config':
      raise UsageError(f'--config {path}: unknown flag {name!r}')
    if not FLAGS[name].present:
      try:
        FLAGS[name].parse(value if isinstance(value, str) else
                          json.dumps(value) if isinstance(value, bool)
                          else str(value))
      except flags.Error as e:
        raise UsageError(f'--config {path}: {e}') from None


def config_from_flags():
  """The validated TrainConfig of the parsed flags (and --config file)."""
  if FLAGS.config:
    _apply_config_file(FLAGS.config)
  values = {name: FLAGS[name].value for name in _DEFAULTS if name in FLAGS}
  if FLAGS.job_dir:
    if FLAGS['model_dir'].present and FLAGS.model_dir != FLAGS.job_dir:
      raise UsageError('--job_dir is an alias of --model_dir: give one')
    values['model_dir'] = FLAGS.job_dir
  return config_lib.TrainConfig(**values)


def main(argv):
  try:
    if len(argv) > 1:
      raise UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
    config = config_from_flags()
    if not FLAGS.listen_all_interfaces:
      listen.confine(config.cluster)
    console.quiet_tensorflow(verbose=logging.get_verbosity() >= logging.DEBUG)
    logging.info('Config: %s', config)
    engines.ENGINES[config.engine].run(config)
  except TrainerError as e:
    errors.fail(e.exit_code, str(e))
  except Exception as e:  # pylint: disable=broad-except
    # No traceback for users; --verbosity=1 shows it.
    logging.debug('Failure', exc_info=True)
    message = (str(e).strip().splitlines() or [''])[0]
    errors.fail(TrainerError.exit_code, f'{type(e).__name__}: {message}')


def run():
  app.run(main, flags_parser=errors.parse_flags)


if __name__ == '__main__':
  run()
