"""SavedModel export: serving inputs, exporters, and the export mode."""

import logging

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer.data import model_images

_logger = logging.getLogger(__name__)


def serving_input_receiver_fn(example_format):
  """A receiver fn with two ways in: a float32 image batch, or serialized
  tf.Example protos of `example_format` (examples.ExampleFormat).

  The image input defaults to the parsed examples, so a signature that feeds
  only `examples` computes from them, and one that feeds `image` overrides
  them (with no examples, the parsed batch is empty and unused).
  """
  def receiver_fn():
    examples = tf.compat.v1.placeholder_with_default(
        tf.constant([], tf.string), [None], name='examples')
    images = tf.compat.v1.placeholder_with_default(
        model_images(example_format.decode_images(examples)),
        [None, *example_format.image_shape], name='image')
    return tf.estimator.export.ServingInputReceiver(
        features={'image': images},
        receiver_tensors={'image': images},
        receiver_tensors_alternatives={'examples': {'examples': examples}})
  return receiver_fn


def eval_input_receiver_fn(example_format):
  """TFMA's input of the TFX Trainer contract: serialized tf.Example protos
  with their labels. Needs tensorflow-model-analysis (the `tfx` extra)."""
  def receiver_fn():
    import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
    examples = tf.compat.v1.placeholder(tf.string, [None],
                                        name='input_example_tensor')
    return tfma.export.EvalInputReceiver(
        features={'image': model_images(example_format.decode_images(examples))},
        labels=example_format.decode_labels(examples),
        receiver_tensors={'examples': examples})
  return receiver_fn


def _accuracy_at_least_best(best_eval_result, current_eval_result):
  # >=, not >: BestExporter's first comparison is against the event files,
  # which already hold the current evaluation, so > would never export it.
  return current_eval_result['accuracy'] >= best_eval_result['accuracy']


def _log_export(path):
  """Logs where a SavedModel landed (Estimator's own line names the
  temporary directory it writes first); returns the path as a string."""
  path = path.decode() if isinstance(path, bytes) else path
  _logger.info('Exported a SavedModel to %s', path)
  return path


class _Logged(tf.estimator.Exporter):
  """An Estimator exporter that logs each SavedModel it writes."""

  def __init__(self, exporter):
    self._exporter = exporter

  @property
  def name(self):
    return self._exporter.name

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    path = self._exporter.export(estimator, export_path, checkpoint_path,
                                 eval_result, is_the_final_export)
    if path:  # BestExporter writes only for a better evaluation.
      _log_export(path)
    return path


def make_exporters(kind, example_format, keep=5):
  """The Estimator exporters of `--export` (an empty list for `none`)."""
  serving_input_fn = serving_input_receiver_fn(example_format)
  if kind == 'latest':
    exporter = tf.estimator.LatestExporter(
        'latest', serving_input_fn, exports_to_keep=keep)
  elif kind == 'best':
    exporter = tf.estimator.BestExporter(
        'best', serving_input_fn, compare_fn=_accuracy_at_least_best,
        exports_to_keep=keep)
  elif kind == 'final':
    exporter = tf.estimator.FinalExporter('final', serving_input_fn)
  else:
    return []
  return [_Logged(exporter)]


def export_latest_checkpoint(estimator, model_dir, example_format):
  """Writes a SavedModel of the latest checkpoint; returns its directory."""
  return _log_export(estimator.export_saved_model(
      layout.export_dir(model_dir, 'manual'),
      serving_input_receiver_fn(example_format)))
