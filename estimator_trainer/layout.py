"""A model_dir's layout: every path the package writes or reads there, the
step in a checkpoint's name, and the scalars of its event files.

Imports no TensorFlow: the config runs before it loads, and
scripts/benchmark.py reads event files in a process that must stay small.
"""

import glob
import json
import os
import struct

from estimator_trainer.errors import TrainerError

EVAL_DIR = 'eval'  # Evaluation events (TensorBoard's `eval` run).
# --validation_fraction's evaluations (Estimator's eval dir of an
# evaluation named 'validation'), and the best one's checkpoint.
VALIDATION = 'validation'
VALIDATION_EVAL_DIR = f'{EVAL_DIR}_{VALIDATION}'
BEST_DIR = 'best_validation'
EXPORT_DIR = 'export'  # export/<exporter>/<timestamp>/: SavedModels.
METRICS_FILE = 'metrics.json'  # The final evaluation.
PREDICTIONS_FILE = 'predictions.jsonl'  # --mode=predict's default output.
TRAIN_SPEC_FILE = 'train_spec.json'  # A cluster chief's step count.
FINISHED_DIR = 'finished'  # One file per training task that finished.
EVALUATOR_FILE = 'evaluator.json'  # An evaluator task runs.
MODEL_FILE = 'model.json'  # The run (model, data...) its checkpoints are of.
LOCK_FILE = 'lock.json'  # The training run that holds it (run_lock.py).
# A run that chooses its length: the cross-validation runs (length_choice).
LENGTH_DIR = 'length'
# An estimator checkpoint's --ema_decay average of weight W: W/<this>.
AVERAGE_SUFFIX = 'ExponentialMovingAverage'
# Structured data's preprocessing: the statistics computed from the training
# split once and the feature spec they are of (tabular/statistics/).
PREPROCESSING_DIR = 'preprocessing'
STATISTICS_FILE = 'statistics.json'
FEATURE_SPEC_FILE = 'feature_spec.json'
TRAINING_FILES_FILE = 'training_files.json'
# The estimator engine's warm start across changed vocabularies: the files
# of each remapped table's rows (tabular/warm_start.py), <table>.{old,new}.
WARM_START_DIR = 'warm_start'
# The checkpoint state file (tf.train.latest_checkpoint's, every engine's).
CHECKPOINT_STATE_FILE = 'checkpoint'


def eval_dir(model_dir):
  return os.path.join(model_dir, EVAL_DIR)


def validation_eval_dir(model_dir):
  return os.path.join(model_dir, VALIDATION_EVAL_DIR)


def best_dir(model_dir):
  return os.path.join(model_dir, BEST_DIR)


def export_dir(model_dir, exporter):
  return os.path.join(model_dir, EXPORT_DIR, exporter)


def metrics_file(model_dir):
  return os.path.join(model_dir, METRICS_FILE)


def length_dir(model_dir):
  return os.path.join(model_dir, LENGTH_DIR)


def model_file(model_dir):
  return os.path.join(model_dir, MODEL_FILE)


def preprocessing_dir(model_dir):
  return os.path.join(model_dir, PREPROCESSING_DIR)


def statistics_file(model_dir):
  return os.path.join(model_dir, PREPROCESSING_DIR, STATISTICS_FILE)


def feature_spec_file(model_dir):
  return os.path.join(model_dir, PREPROCESSING_DIR, FEATURE_SPEC_FILE)


def training_files_file(model_dir):
  """The training files the statistics were computed from."""
  return os.path.join(model_dir, PREPROCESSING_DIR, TRAINING_FILES_FILE)


def warm_start_vocabulary_file(model_dir, table, which):
  """The vocabulary file of `table` (a variable's index) `which` ('old' or
  'new') of an estimator engine's warm start."""
  return os.path.join(model_dir, WARM_START_DIR, f'{table}.{which}')


def stored_feature_spec(model_dir):
  """The path of model_dir's stored feature spec; None without one."""
  path = feature_spec_file(model_dir)
  return path if exists(path) else None


def exists(path):
  """Whether `path` exists; TensorFlow only for a URL."""
  if '://' in path:  # gs://...: only TensorFlow reads those.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf.io.gfile.exists(path)
  return os.path.exists(path)


def source_model_dir(path):
  """The model_dir of a --warm_start_from (or migrate --from) `path`: a
  checkpoint prefix's directory (its .index exists), else `path` itself
  (never a parent of a model_dir: one nested in another run's is not of
  that run)."""
  path = path.rstrip('/')
  return os.path.dirname(path) if exists(f'{path}.index') else path


def has_checkpoint(model_dir):
  """Whether model_dir has a checkpoint state file (of any engine)."""
  return exists(os.path.join(model_dir, CHECKPOINT_STATE_FILE))


def read_model_file(model_dir):
  """model_dir's record of the run its checkpoints are of (MODEL_FILE, a
  dict); None without one."""
  path = model_file(model_dir)
  if not exists(path):
    return None
  return read_json(path, 'a record of a run')


def read_json(path, what):
  """The JSON object in `path` (local or gs://...; TensorFlow only for
  the latter: the CLI reads before it loads); TrainerError naming `what`
  it should be otherwise."""
  try:
    if '://' in path:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      with tf.io.gfile.GFile(path) as f:
        value = json.load(f)
    else:
      with open(path) as f:
        value = json.load(f)
  except (OSError, ValueError) as e:
    raise TrainerError(f'{path}: not {what} ({e})') from None
  if not isinstance(value, dict):
    raise TrainerError(f'{path}: not {what}')
  return value


def predictions_file(model_dir):
  return os.path.join(model_dir, PREDICTIONS_FILE)


def train_spec_file(model_dir):
  return os.path.join(model_dir, TRAIN_SPEC_FILE)


def finished_file(model_dir, task_type, task_index):
  return os.path.join(model_dir, FINISHED_DIR, f'{task_type}-{task_index}.json')


def evaluator_file(model_dir):
  """Where a running evaluator task announces itself, a lease (estimator
  engine)."""
  return os.path.join(model_dir, EVALUATOR_FILE)


def lock_file(model_dir):
  """The lease of the training run that holds model_dir (run_lock.py)."""
  return os.path.join(model_dir, LOCK_FILE)


def scratch_dir(model_dir, task_type, task_index):
  """Where a non-chief worker's collective saves go (TensorFlow's own
  naming); removed after training."""
  return os.path.join(model_dir, f'tmp_{task_type}_{task_index}')


def checkpoint_step(path):
  """The global step in a checkpoint's name (`model.ckpt-1000`,
  `ckpt-1000`)."""
  return int(str(path).rsplit('-', 1)[1])


def _records(path):
  """The records of a TFRecord file; stops at one still being written."""
  with open(path, 'rb') as f:
    while True:
      header = f.read(12)  # uint64 length, uint32 CRC of the length.
      if len(header) < 12:
        return
      length = struct.unpack('<Q', header[:8])[0]
      record = f.read(length)
      f.read(4)  # CRC of the data.
      if len(record) < length:
        return
      yield record


# TensorProto dtypes of v2 scalar summaries: DT_FLOAT, DT_DOUBLE.
_TENSOR_FORMATS = {1: ('<f', 'float_val'), 2: ('<d', 'double_val')}


def _scalar(value):
  """The number a summary value holds, or None if it is not a scalar.

  v1 summaries (Estimator) hold `simple_value`; v2 ones (the TF2 engines) a
  float scalar tensor.
  """
  if value.WhichOneof('value') == 'simple_value':
    return value.simple_value
  tensor = value.tensor
  if value.WhichOneof('value') != 'tensor' or tensor.tensor_shape.dim or (
      tensor.dtype not in _TENSOR_FORMATS):
    return None
  fmt, field = _TENSOR_FORMATS[tensor.dtype]
  if tensor.tensor_content:
    return struct.unpack(fmt, tensor.tensor_content)[0]
  values = getattr(tensor, field)
  return values[0] if values else None


def read_scalars(directory):
  """{tag: [(step, value), ...] by step} of the scalar summaries in the
  event files of `directory` (not its subdirectories); {} without any."""
  # TensorBoard's protos: plain protobuf, no TensorFlow.
  from tensorboard.compat.proto import event_pb2  # pylint: disable=g-import-not-at-top
  scalars = {}
  for path in sorted(glob.glob(os.path.join(directory,
                                            'events.out.tfevents.*'))):
    for record in _records(path):
      event = event_pb2.Event.FromString(record)
      for value in event.summary.value:
        number = _scalar(value)
        if number is not None:
          scalars.setdefault(value.tag, []).append((event.step, number))
  return {tag: sorted(points) for tag, points in scalars.items()}


def absolute(patterns):
  """Comma-separated paths or globs with each local one made absolute (a
  record a run in another directory reads alike); a remote one (gs://...)
  as it is."""
  if not patterns:
    return patterns
  return ','.join(part if '://' in part else os.path.abspath(part)
                  for part in patterns.split(','))
