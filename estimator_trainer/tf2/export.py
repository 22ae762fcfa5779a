"""SavedModels of the TF2 engines, with the estimator engine's signatures:
`serving_default` takes a float32 image batch (`image`),
`examples:serving_default` serialized tf.Examples (`examples`); both return
`classes` (int64), `probabilities` and `logits` (float32). Serving clients
and `saved_model_cli` cannot tell which engine exported.

Structured data: canned's serving contract. `predict` takes serialized
tf.Examples (`examples`) and returns the head's predictions under canned
names; `classification` (`classes`, `scores`) and `regression`
(`outputs`) take them as `inputs`, with TensorFlow Serving's Classify and
Regress methods, which TensorFlow Serving and tfx-bsl's RunInference
dispatch on, and `serving_default` is the first of them, as canned's
(heads' serving_outputs); `raw:predict` takes the raw columns (keyed by
tabular.dataset.signature_key: a column's name where TensorFlow 2 allows
it). tf.saved_model.save writes every signature with the Predict method:
the others' method is set in the SavedModel it wrote (_set_methods)."""

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from estimator_trainer import checkpoints
from estimator_trainer import export_policy
from estimator_trainer import layout
from estimator_trainer import models
from estimator_trainer.data import model_images
from estimator_trainer.examples import EXAMPLES_SIGNATURE, ExampleFormat
from estimator_trainer.tf2 import job as job_lib


class _Serving(tf.Module):
  """The model and its two serving functions."""

  def __init__(self, model, head, example_format):
    super().__init__()
    self.model = model
    self._head = head
    self._example_format = example_format
    self.serve_images = tf.function(
        self._serve_images, input_signature=[tf.TensorSpec(
            [None, *example_format.image_shape], tf.float32, name='image')])
    self.serve_examples = tf.function(
        self._serve_examples, input_signature=[tf.TensorSpec(
            [None], tf.string, name='examples')])

  def _serve_images(self, image):
    return self._head.predictions(self.model(image, training=False))

  def _serve_examples(self, examples):
    return self._serve_images(
        model_images(self._example_format.decode_images(examples)))

  def signatures(self):
    return {'serving_default': self.serve_images,
            EXAMPLES_SIGNATURE: self.serve_examples}


class _TabularServing(tf.Module):
  """The preprocessing (`serving`: tabular/dataset.py's), the model and the
  head's predictions, on serialized tf.Examples or raw columns."""

  def __init__(self, model, head, serving):
    super().__init__()
    self.model = model
    self.encoder = serving.encoder()  # Its lookup tables are saved too.
    self._keys = models.FeatureKeys.of(self.encoder.inputs)
    self._head = head
    self._serving = serving
    self.serve_examples = tf.function(
        self._serve_examples, input_signature=[tf.TensorSpec(
            [None], tf.string, name='examples')])
    # Keyed by signature_key: tf.saved_model.save takes no other key.
    self.serve_raw = tf.function(self._serve_raw, input_signature=[{
        spec.name: spec for spec in serving.raw_signature.values()}])
    # One string input, `inputs`, as TensorFlow Serving's Classify and
    # Regress take it; the head's signature of each.
    self.serve_canned = {
        name: tf.function(lambda inputs, name=name: self._canned(
            inputs, name), input_signature=[tf.TensorSpec(
                [None], tf.string, name='inputs')])
        for name in head.serving_methods}

  def _canned(self, inputs, name):
    return self._head.serving_outputs(self._serve_examples(inputs))[name]

  def _predictions(self, raw):
    """The head's predictions, and the key (canned forward_features: the
    predict signatures return it; classify and regress cannot, since
    TensorFlow Serving takes one or two outputs of the one and one of the
    other)."""
    return self._keys.with_forwarded(self._head.predictions(self.model(
        self.encoder(raw), training=False)), self._serving.forwarded(raw))

  def _serve_raw(self, inputs):
    return self._predictions({
        name: inputs[spec.name]
        for name, spec in self._serving.raw_signature.items()})

  def _serve_examples(self, examples):
    return self._predictions(self._serving.parse_examples(examples))

  def signatures(self):
    default = next(iter(self.serve_canned.values()), self.serve_examples)
    return {'serving_default': default, **self.serve_canned,
            'predict': self.serve_examples, 'raw:predict': self.serve_raw}


def _serving_module(model, head, example_format):
  if isinstance(example_format, ExampleFormat):
    return _Serving(model, head, example_format)
  return _TabularServing(model, head, example_format)


def write(model, head, example_format, base_dir, record=None):
  """Writes a SavedModel to `base_dir/<timestamp>/`, as Estimator names
  them, with `record` (export_policy.RECORD's text) if given, whole
  (export_policy.write_whole: a reader never sees half of one, a concurrent
  exporter takes another name). Returns its path."""
  return export_policy.write_whole(
      lambda temporary: _save(model, head, example_format, temporary, record),
      base_dir, 'manual')


def _save(model, head, example_format, path, record):
  serving = _serving_module(model, head, example_format)
  signatures = serving.signatures()
  tf.saved_model.save(serving, path, signatures=signatures)
  methods = {name: head.serving_methods[name] for name in signatures
             if name in head.serving_methods}
  if methods:
    methods['serving_default'] = next(iter(methods.values()))
    _set_methods(path, methods)
  if record is not None:
    tf.io.gfile.makedirs(os.path.join(path, export_policy.EXTRA_DIR))
    with tf.io.gfile.GFile(os.path.join(path, export_policy.RECORD),
                           'w') as f:
      f.write(record)
  return path


def _set_methods(path, methods):
  """Sets the SavedModel at `path`'s signatures' methods ({name: method}):
  tf.saved_model.save writes Predict's alone. Its graph, signatures'
  inputs and outputs are as saved: TensorFlow Serving checks the Classify
  and Regress methods' keys and dtypes, which the functions give."""
  file = os.path.join(path, tf.saved_model.SAVED_MODEL_FILENAME_PB)
  with tf.io.gfile.GFile(file, 'rb') as f:
    saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  for meta_graph in saved_model.meta_graphs:
    for name, method in methods.items():
      meta_graph.signature_def[name].method_name = method
  with tf.io.gfile.GFile(file, 'wb') as f:
    f.write(saved_model.SerializeToString())


class Exporter:
  """`--export` for the TF2 engines (export_policy's rule, as the estimator
  engine applies it), from the weights of `model`; a task other than the
  chief writes under `task_dir` (its scratch dir), not model_dir."""

  def __init__(self, config, model, head, example_format, task_dir=None):
    self._model = model
    self._head = head
    self._example_format = example_format
    self._policy = export_policy.ExportPolicy(
        config, task_dir and layout.export_dir(task_dir, config.export))

  def after_evaluation(self, result, final):
    """After an evaluation (`final`: of the last step); returns the path
    written, or None."""
    if not self._policy.wants(result, final):
      return None
    return self._policy.write(lambda record, temporary: _save(
        self._model, self._head, self._example_format, temporary, record),
                              result)


def export(config):
  """--mode export: a SavedModel of the latest checkpoint, under
  export/manual/ as the estimator engine writes it; returns its path."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.Job(config, training=False)
  job.restore()
  return write(job.model, job.head, job.example_format,
               layout.export_dir(config.model_dir, 'manual'))
