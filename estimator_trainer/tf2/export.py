"""SavedModels of the TF2 engines, with the estimator engine's signatures:
`serving_default` takes a float32 image batch (`image`),
`examples:serving_default` serialized tf.Examples (`examples`); both return
`classes` (int64), `probabilities` and `logits` (float32). Serving clients
and `saved_model_cli` cannot tell which engine exported."""

import logging
import os
import time

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import layout
from estimator_trainer import models
from estimator_trainer.data import model_images
from estimator_trainer.examples import EXAMPLES_SIGNATURE
from estimator_trainer.tf2 import job as job_lib

_logger = logging.getLogger(__name__)


class _Serving(tf.Module):
  """The model and its two serving functions."""

  def __init__(self, model, example_format):
    super().__init__()
    self.model = model
    self._example_format = example_format
    self.serve_images = tf.function(
        self._serve_images, input_signature=[tf.TensorSpec(
            [None, *example_format.image_shape], tf.float32, name='image')])
    self.serve_examples = tf.function(
        self._serve_examples, input_signature=[tf.TensorSpec(
            [None], tf.string, name='examples')])

  def _serve_images(self, image):
    return models.predictions(self.model(image, training=False))

  def _serve_examples(self, examples):
    return self._serve_images(
        model_images(self._example_format.decode_images(examples)))

  def signatures(self):
    return {'serving_default': self.serve_images,
            EXAMPLES_SIGNATURE: self.serve_examples}


def write(model, example_format, base_dir):
  """Writes a SavedModel to `base_dir/<timestamp>/`, as Estimator names
  them: first to a temporary directory beside it, then renamed, so a
  reader never sees half of one. Returns its path."""
  tf.io.gfile.makedirs(base_dir)
  timestamp = int(time.time())
  while tf.io.gfile.exists(os.path.join(base_dir, str(timestamp))):
    timestamp += 1
  path = os.path.join(base_dir, str(timestamp))
  temporary = os.path.join(base_dir, f'temp-{timestamp}')
  serving = _Serving(model, example_format)
  tf.saved_model.save(serving, temporary, signatures=serving.signatures())
  tf.io.gfile.rename(temporary, path)
  _logger.info('Exported a SavedModel to %s', path)
  return path


class Exporter:
  """`--export` for the TF2 engines, as Estimator's exporters do it: `final`
  after training, `latest` after every evaluation, `best` after an evaluation
  at least as accurate as every earlier one; the `keep` newest of `latest`
  and `best` are kept."""

  def __init__(self, kind, model, example_format, model_dir, keep=5):
    self.kind = kind
    self._model = model
    self._example_format = example_format
    self._base_dir = layout.export_dir(model_dir, kind)
    self._keep = keep
    self._best_accuracy = None

  def after_evaluation(self, result, final):
    """After an evaluation (`final`: of the last step); returns the path
    written, or None."""
    if self.kind == 'final' and final or self.kind == 'latest':
      return self._write()
    if self.kind == 'best' and (self._best_accuracy is None or
                                result['accuracy'] >= self._best_accuracy):
      self._best_accuracy = result['accuracy']
      return self._write()
    return None

  def _write(self):
    path = write(self._model, self._example_format, self._base_dir)
    exports = sorted((name for name in tf.io.gfile.listdir(self._base_dir)
                      if name.strip('/').isdigit()), key=lambda n: int(
                          n.strip('/')))
    for old in exports[:-self._keep]:
      tf.io.gfile.rmtree(os.path.join(self._base_dir, old))
    return path


def export(config):
  """--mode export: a SavedModel of the latest checkpoint, under
  export/manual/ as the estimator engine writes it; returns its path."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.Job(config, training=False)
  job.restore()
  return write(job.model, job.example_format,
               layout.export_dir(config.model_dir, 'manual'))
