"""Evaluation by the TF2 engines: the whole test set, each example once,
under the job's strategy; model_dir/eval and metrics.json as the estimator
engine writes them."""

import logging
import time

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import layout
from estimator_trainer import losses
from estimator_trainer import outputs
from estimator_trainer import summaries
from estimator_trainer.data import ModeKeys
from estimator_trainer.tf2 import export
from estimator_trainer.tf2 import job as job_lib

_logger = logging.getLogger(__name__)

EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT


class Evaluator:
  """Evaluates the model on the whole test set (each example once) under the
  job's strategy; writes model_dir/eval as the estimator engine does. Of
  `data`'s test set instead if given, into model_dir/`subdir`
  (--validation_fraction's part: data.validation())."""

  def __init__(self, job, data=None, subdir=layout.EVAL_DIR):
    self._job = job
    self._what = '' if data is None else ' of the validation part'
    self.model = job.model
    with job.strategy.scope():
      self._metrics = job.head.eval_metrics()
      # Of batch means, as Estimator reports `loss`.
      self._loss = tf.keras.metrics.Mean(name='loss')
    self._dataset = job.distribute(EVAL, data and data.make_input_fn(
        job.config, job.global_batch_size))
    self._writer = job_lib.writer(job, subdir)

  def _replica_step(self, features, labels):
    keys = self._job.feature_keys
    inputs = keys.inputs(features)
    logits = self._job.model(inputs, training=False)
    weights = features[keys.weight]
    self._metrics.update(inputs, labels, logits, weights,
                         features[keys.padding])
    self._loss.update_state(losses.weighted_mean(
        self._job.head.eval_loss(labels, logits), weights))

  @tf.function
  def _run(self):
    for features, labels in self._dataset:
      self._job.strategy.run(self._replica_step, (features, labels))

  def evaluate(self, step):
    """Returns Estimator's eval dict (accuracy, loss, ..., global_step)."""
    self._metrics.reset()
    self._loss.reset_state()
    start = time.monotonic()
    self._run()
    result = {name: metric.result().numpy() for name, metric in
              [*self._metrics.scalars.items(), ('loss', self._loss)]}
    result['global_step'] = step
    with self._writer.as_default(step=step):
      for name, value in result.items():
        if name != 'global_step':
          tf.summary.scalar(name, value)
      for name, image in self._metrics.images.items():
        tf.summary.experimental.write_raw_pb(summaries.tagged_as_estimator(
            name, image.result().numpy()))
    self._writer.flush()
    # As metrics.json names them (its `loss` the mean per example; no NumPy
    # reprs: NumPy 2 prints np.float32).
    _logger.info('Evaluation%s at step %d (%.1f s): %s', self._what, step,
                 time.monotonic() - start, ', '.join(
                     f'{name} = {value:.6g}' for name, value in
                     outputs.as_metrics_json(result).items()))
    return result


class CheckpointEvaluator:
  """Evaluates checkpoints of a training run in a model of its own, with no
  strategy: the evaluator task's, and a parameter-server chief's (whose
  training model lives on the ps tasks)."""

  def __init__(self, config):
    self.job = job_lib.Job(config, training=False)
    self._evaluator = Evaluator(self.job)
    self.model = self.job.model

  def evaluate(self, path):
    """Restores the checkpoint at `path` and evaluates it."""
    self.job.checkpoint.restore(path).expect_partial()
    if self.job.ema:
      self.job.ema.copy_to_model()
    return self._evaluator.evaluate(layout.checkpoint_step(path))


def write_results(job, result):
  """metrics.json of a training job's final evaluation, on the chief; None
  elsewhere, or when preempted (`result` None)."""
  if not job.is_chief or result is None:
    return None
  return outputs.write_eval_metrics(job.config.model_dir, result)


def evaluate(config):
  """--mode evaluate: restores the latest checkpoint's model, with no
  strategy, and evaluates it; writes model_dir/eval and metrics.json."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.Job(config, training=False)
  step = job.restore()
  return outputs.write_eval_metrics(config.model_dir,
                                    Evaluator(job).evaluate(step))


def final_evaluation(config):
  """Evaluates and exports (as final) model_dir's latest checkpoint, in a
  model of its own with no strategy; returns the evaluation: what is left
  of a run that ended before (training_progress.finish_ended). (Not in the
  training job's model: its optimizer, which no step would build, would
  leave the checkpoint's slots unrestored.)"""
  job = job_lib.Job(config, training=False)
  result = Evaluator(job).evaluate(job.restore())
  if config.export != 'none':
    export.Exporter(config, job.model, job.head,
                    job.example_format).after_evaluation(result, final=True)
  return result


def predict(config):
  """--mode predict: the first `num_predictions` test examples' (or every
  --predict_files record's) predictions, each with its forwarded key and
  place, written as the estimator engine writes them."""
  checkpoints.require_checkpoint(config.model_dir)
  job = job_lib.Job(config, training=False)
  job.restore()
  keys = job.feature_keys
  batches = ({name: values.numpy() for name, values in keys.with_forwarded(
      job.head.predictions(job.model(keys.inputs(features), training=False)),
      features).items()}
             for features in job.input_fn(PREDICT))
  path = config.resolved_predictions_file
  count = outputs.write_predictions(path, (
      {name: values[i] for name, values in batch.items()}
      for batch in batches for i in range(len(next(iter(batch.values()))))))
  _logger.info('Wrote %d predictions to %s', count, path)
  return path
