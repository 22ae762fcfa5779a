"""SavedModel export: serving inputs, exporters, and the export mode."""

import os
import tempfile

import tensorflow as tf

from estimator_trainer import examples as examples_lib
from estimator_trainer import export_policy
from estimator_trainer import layout
from estimator_trainer.data import model_images


def serving_input_receiver_fn(example_format):
  """The receiver fn of data whose tf.Examples `example_format` describes:
  an examples.ExampleFormat of images, or structured data's serving object
  (tabular/dataset.py)."""
  if isinstance(example_format, examples_lib.ExampleFormat):
    return _image_receiver_fn(example_format)
  return _tabular_receiver_fn(example_format)


def _tabular_receiver_fn(serving):
  """Serialized tf.Examples under `examples`, as a canned Estimator's
  parsing receiver takes them (its classification, regression and predict
  signatures need one string input), or raw columns under their names
  (signatures `raw:...`); the preprocessing is in the graph, so clients
  send raw values. The key column (--key_column) is forwarded to the
  predict signatures' outputs. The columns default to the parsed examples, as the
  images' receiver does."""
  def receiver_fn():
    examples = tf.compat.v1.placeholder_with_default(
        tf.constant([], tf.string), [None], name='input_example_tensor')
    parsed = serving.parse_examples(examples)
    # Op names are the specs' (an op cannot be named 'mean radius'); the
    # signature's keys, any string here, the columns' own.
    raw = {name: tf.compat.v1.placeholder_with_default(
        parsed[name], spec.shape, name=spec.name)
           for name, spec in serving.raw_signature.items()}
    return tf.estimator.export.ServingInputReceiver(
        features={**serving.encode(raw), **serving.forwarded(raw)},
        receiver_tensors={'examples': examples},
        receiver_tensors_alternatives={'raw': raw})
  return receiver_fn


def _image_receiver_fn(example_format):
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
  with their labels (`example_format` as serving_input_receiver_fn takes
  it). Needs tensorflow-model-analysis (the `tfx` extra)."""
  def receiver_fn():
    import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
    examples = tf.compat.v1.placeholder(tf.string, [None],
                                        name='input_example_tensor')
    if isinstance(example_format, examples_lib.ExampleFormat):
      features = {'image': model_images(
          example_format.decode_images(examples))}
      labels = example_format.decode_labels(examples)
    else:
      features, labels = example_format.encode_labeled(examples)
    return tfma.export.EvalInputReceiver(
        features=features, labels=labels,
        receiver_tensors={'examples': examples})
  return receiver_fn


def _path(path):
  """Estimator's export path (bytes) as a string."""
  return path.decode() if isinstance(path, bytes) else path


class _Exporter(tf.estimator.Exporter):
  """`--export` for the estimator engine (export_policy's rule, as the TF2
  engines apply it): a SavedModel of the evaluated checkpoint, holding its
  evaluation."""

  def __init__(self, config, example_format):
    self._policy = export_policy.ExportPolicy(config)
    self._serving_input_fn = serving_input_receiver_fn(example_format)

  @property
  def name(self):
    return self._policy.kind

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del export_path  # The policy's base_dir: the same directory.
    if not self._policy.wants(eval_result, is_the_final_export):
      return None
    return self._policy.write(
        lambda record, temporary: self._write(
            estimator, checkpoint_path, record, temporary), eval_result)

  def _write(self, estimator, checkpoint_path, record, temporary):
    with tempfile.TemporaryDirectory() as scratch:
      source = os.path.join(scratch, export_policy.RECORD_FILE)
      with open(source, 'w') as f:
        f.write(record)
      return _path(estimator.export_saved_model(
          temporary, self._serving_input_fn,
          assets_extra={export_policy.RECORD_FILE: source},
          checkpoint_path=checkpoint_path))


def make_exporters(config, example_format):
  """The Estimator exporters of `--export` (an empty list for `none`)."""
  return [] if config.export == 'none' else [_Exporter(config,
                                                       example_format)]


def export_latest_checkpoint(estimator, model_dir, example_format):
  """Writes a SavedModel of the latest checkpoint; returns its directory."""
  return export_policy.write_whole(
      lambda temporary: _path(estimator.export_saved_model(
          temporary, serving_input_receiver_fn(example_format))),
      layout.export_dir(model_dir, 'manual'), 'manual')
