"""model_dir's result files: checked writable up front, never half-written."""

import contextlib
import json
import logging
import os


from estimator_trainer import layout
from estimator_trainer.errors import ModelDirInUse, TrainerError

_logger = logging.getLogger(__name__)


def require_writable_dir(path):
  """Fails unless `path` is, or can be created as, a writable directory.

  Checks permissions without writing anything, so that a run that cannot
  save fails before training, and leaves no trace. Remote URLs (gs://...)
  are left to their first write.
  """
  if '://' in path:
    return
  existing = os.path.abspath(path)
  while not os.path.exists(existing):  # The nearest existing ancestor.
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise TrainerError(f'cannot write to {path}: {existing} is not a '
                       'directory')
  if not os.access(existing, os.W_OK | os.X_OK):
    raise TrainerError(f'cannot write to {path}: {existing} is not writable')


def write_atomic(path, data):
  """Writes `data` (str or bytes, or an iterable of str: written as it
  comes, in bounded memory) to `path` through a temporary file and a
  rename: readers see the old file or the whole new one, never a part.

  `path` may be local or, through tf.io.gfile, a URL (gs://...); local paths
  need no TensorFlow (scripts that never load it use this too).
  """
  binary = isinstance(data, bytes)
  chunks = [data] if isinstance(data, (str, bytes)) else data
  tmp = f'{path}.tmp-{os.getpid()}'
  if '://' in path:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.io.gfile.GFile(tmp, 'wb' if binary else 'w') as f:
      for chunk in chunks:
        f.write(chunk)
    tf.io.gfile.rename(tmp, path, overwrite=True)
    return
  if os.path.dirname(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
  try:
    with open(tmp, 'wb' if binary else 'w') as f:
      for chunk in chunks:
        f.write(chunk)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


def _plain(value):
  """numpy scalars -> Python numbers, for JSON."""
  return value.item() if hasattr(value, 'item') else value


def write_metrics(model_dir, metrics):
  """Writes `<model_dir>/metrics.json`; returns the dict written."""
  result = {key: _plain(value) for key, value in sorted(metrics.items())}
  write_atomic(layout.metrics_file(model_dir),
               json.dumps(result, indent=2) + '\n')
  return result


def write_eval_metrics(model_dir, eval_result):
  """metrics.json of a final evaluation (Estimator's eval dict,
  as_metrics_json's names); returns it."""
  metrics = write_metrics(model_dir, as_metrics_json(eval_result))
  _logger.info('Final evaluation (in %s): %s', layout.metrics_file(model_dir),
               shown_metrics(metrics))
  return metrics


def as_metrics_json(eval_result):
  """Estimator's eval dict as metrics.json names it: its `loss` (a mean
  of per-batch means) `batch_mean_loss`, `loss` the exact mean per example
  (`average_loss`); image summaries (bytes) left out."""
  metrics = {name: value for name, value in eval_result.items()
             if not isinstance(value, bytes)}
  metrics['batch_mean_loss'] = metrics.pop('loss')
  metrics['loss'] = metrics['average_loss']
  return metrics


def shown_metrics(metrics):
  """`metrics` as the console shows them: floats to 4 decimals, as the
  progress line's loss (float32's noise, 0.9185000061988831, is no
  figure); metrics.json keeps every digit."""
  return {name: round(value, 4) if isinstance(value, float) else value
          for name, value in metrics.items()}


def _prediction_line(index, prediction):
  """An image classifier's `{"index", "class", "probabilities"}`; other
  heads' every prediction under its canned name (`class_ids`, `classes`,
  `probabilities`, `logistic`, `predictions`, `logits`), as lists, and the
  row's forwarded key and place (tabular/rows.py) as they are."""
  if 'class_ids' not in prediction and 'classes' in prediction:
    return {'index': index, 'class': int(prediction['classes']),
            'probabilities': [round(float(x), 6)
                              for x in prediction['probabilities']]}
  return {'index': index, **prediction_fields(prediction)}


def prediction_fields(prediction):
  """A prediction's values by name, as JSON takes them: lists, strings
  decoded, floats to 6 decimals (predictions.jsonl's, and Beam scoring's
  lines)."""
  fields = {}
  for name, values in sorted(prediction.items()):
    values = getattr(values, 'tolist', lambda v=values: v)()
    if isinstance(values, list):
      values = [value.decode() if isinstance(value, bytes) else (
          round(value, 6) if isinstance(value, float) else value)
                for value in values]
    elif isinstance(values, bytes):  # A forwarded key or file, as given.
      values = values.decode()
    fields[name] = values
  return fields


def write_predictions(path, predictions):
  """Writes JSON lines of `predictions` (_prediction_line; an iterable, of
  any length: --predict_files' every record) to `path`, as they come;
  returns how many."""
  count = 0

  def lines():
    nonlocal count
    for count, prediction in enumerate(predictions, 1):
      yield json.dumps(_prediction_line(count - 1, prediction)) + '\n'
  write_atomic(path, lines())
  return count


@contextlib.contextmanager
def none_of_a_failed_run(model_dir):
  """A run in a model_dir that does not exist yet: if it fails before a
  checkpoint of a trained step, the model_dir it made is removed (its
  record, events and statistics, of a run that never trained), so that a
  failed command writes nothing. A model_dir that existed is left to the
  engine (the estimator's step-0 checkpoint: checkpoints.none_untrained);
  so is one another run made meanwhile and holds (ModelDirInUse)."""
  made = not layout.exists(model_dir)
  try:
    yield
  except ModelDirInUse:
    raise
  except Exception:
    # Engines import TensorFlow; the scripts using this module's others not.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if made and tf.io.gfile.exists(model_dir):
      latest = tf.train.latest_checkpoint(model_dir)
      if not latest or layout.checkpoint_step(latest) == 0:
        tf.io.gfile.rmtree(model_dir)
        _logger.info('Removed %s: the run failed before it trained a step',
                     model_dir)
    raise
