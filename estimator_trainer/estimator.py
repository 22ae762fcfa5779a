"""The Estimator engine: model_fn, RunConfig factory and the run modes."""

import itertools

from absl import logging
import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import outputs
from estimator_trainer.data import TRAIN, make_input_fn, make_source
from estimator_trainer.errors import TrainerError
from estimator_trainer.model import create_model
from estimator_trainer.strategy import make_strategy, num_replicas

ModeKeys = tf.estimator.ModeKeys
_OPTIMIZERS = {
    'adam': tf.compat.v1.train.AdamOptimizer,
    'sgd': tf.compat.v1.train.GradientDescentOptimizer,
}


def _train_op(optimizer, loss, variables):
  """Applies the gradients of `loss`, which is already per global batch.

  Not `optimizer.minimize`: under Estimator its `compute_gradients` divides
  the loss again by the replica count (`Optimizer._scale_loss`, tensorflow
  #35333). `apply_gradients` sums the replicas' gradients, which is right for
  a loss divided by the global batch.
  """
  grads = tf.compat.v1.gradients(loss, variables)
  return optimizer.apply_gradients(
      zip(grads, variables),
      global_step=tf.compat.v1.train.get_or_create_global_step())


def _learning_rate(params):
  """`learning_rate`, decayed to 0 at `decay_steps` under `lr_decay=cosine`."""
  if params.get('lr_decay', 'none') == 'none':
    return params['learning_rate']
  return tf.compat.v1.train.cosine_decay(
      params['learning_rate'], tf.compat.v1.train.get_or_create_global_step(),
      params['decay_steps'])


def model_fn(features, labels, mode, params):
  """Estimator model_fn for TRAIN, EVAL and PREDICT.

  `features` is `{'image': float32 [batch, 28, 28, 1]}` (EVAL may add a
  `'weight'` per example, 0 for padding); `params` holds `optimizer`,
  `learning_rate`, `global_batch_size` and optionally `lr_decay` ('cosine'
  needs `decay_steps`), `seed`, `weight_decay`.
  """
  model = create_model(seed=params.get('seed'),
                       weight_decay=params.get('weight_decay', 0.0))
  logits = model(features['image'], training=mode == ModeKeys.TRAIN)
  predictions = {
      'classes': tf.argmax(logits, axis=1),
      'probabilities': tf.nn.softmax(logits),
      'logits': logits,
  }
  if mode == ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(
        mode, predictions=predictions,
        export_outputs={'serving_default':
                        tf.estimator.export.PredictOutput(predictions)})

  if mode == ModeKeys.EVAL:
    weights = features.get('weight', tf.ones_like(labels, tf.float32))
    num_examples = tf.keras.metrics.Sum(name='num_examples')
    num_examples.update_state(weights)
    # A per-replica mean, not a share of the global batch: Estimator averages
    # the replicas' `loss`. `average_loss` is exact over the whole test set.
    return tf.estimator.EstimatorSpec(
        mode,
        loss=losses.weighted_mean_loss(labels, logits, weights),
        eval_metric_ops={
            'accuracy': tf.compat.v1.metrics.accuracy(
                labels, predictions['classes'], weights=weights),
            'average_loss': tf.compat.v1.metrics.mean(
                losses.per_example_loss(labels, logits), weights=weights),
            'num_examples': num_examples,
        })

  loss = losses.replica_training_loss(labels, logits,
                                      params['global_batch_size'],
                                      model.losses)
  optimizer = _OPTIMIZERS[params['optimizer']](_learning_rate(params))
  return tf.estimator.EstimatorSpec(
      mode, loss=loss,
      train_op=_train_op(optimizer, loss, model.trainable_variables))


def make_run_config(config):
  """A RunConfig with `train_distribute`/`eval_distribute` from `config`."""
  session_config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  if config.cpu_replicas > 1:
    # Estimator runs v1 sessions: they need the logical CPUs too.
    session_config.device_count['CPU'] = config.cpu_replicas
  return tf.estimator.RunConfig(
      model_dir=config.model_dir,
      tf_random_seed=config.seed,
      save_summary_steps=config.save_summary_steps,
      save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max,
      log_step_count_steps=config.log_step_count_steps,
      session_config=session_config,
      train_distribute=make_strategy(config.strategy, config.cpu_replicas,
                                     config.communication),
      eval_distribute=make_strategy(config.eval_strategy, config.cpu_replicas,
                                    config.communication))


class _Job:
  """What every mode shares: run config, data, input_fn and Estimator."""

  def __init__(self, config):
    self.config = config
    self.run_config = make_run_config(config)
    self.global_batch_size = config.resolve_global_batch_size(
        num_replicas(self.run_config.train_distribute))
    self.source = make_source(config)
    self.max_steps = config.resolve_train_steps(
        self.source.num_examples(TRAIN), self.global_batch_size)
    self.input_fn = make_input_fn(config, self.global_batch_size, self.source)
    self.estimator = tf.estimator.Estimator(
        model_fn, config=self.run_config,
        params=config.model_params(self.global_batch_size, self.max_steps))

  def write_metrics(self, eval_result):
    metrics = dict(eval_result)
    # Estimator's own `loss` is a mean of per-batch means; report the exact
    # mean per example under the conventional name.
    metrics['batch_mean_loss'] = metrics.pop('loss')
    metrics['loss'] = metrics['average_loss']
    metrics = outputs.write_metrics(self.config.model_dir, metrics)
    logging.info('Final evaluation: %s', metrics)
    return metrics


def train_and_evaluate(config):
  """Trains, evaluates on the whole test set; returns metrics.json's dict.

  Returns None on cluster tasks that do not run the final evaluation.
  """
  job = _Job(config)
  train_spec = tf.estimator.TrainSpec(job.input_fn, max_steps=job.max_steps)
  eval_spec = tf.estimator.EvalSpec(job.input_fn, steps=None,
                                    start_delay_secs=0,
                                    throttle_secs=config.throttle_secs)
  result = tf.estimator.train_and_evaluate(job.estimator, train_spec,
                                           eval_spec)
  if result and result[0]:
    return job.write_metrics(result[0])
  return None


def train(config):
  """Trains to the configured step count; returns the final global step."""
  job = _Job(config)
  job.estimator.train(job.input_fn, max_steps=job.max_steps)
  return job.estimator.get_variable_value('global_step')


def _require_checkpoint(config):
  if not tf.train.latest_checkpoint(config.model_dir):
    raise TrainerError(f'no checkpoint in {config.model_dir}; train first')


def evaluate(config):
  """Evaluates the latest checkpoint on the whole test set."""
  _require_checkpoint(config)
  job = _Job(config)
  return job.write_metrics(job.estimator.evaluate(job.input_fn, steps=None))


def predict(config):
  """Writes predictions for the first `num_predictions` test images."""
  _require_checkpoint(config)
  job = _Job(config)
  predictions = itertools.islice(job.estimator.predict(job.input_fn),
                                 config.num_predictions)
  path = config.resolved_predictions_file
  count = outputs.write_predictions(path, predictions)
  logging.info('Wrote %d predictions to %s', count, path)
  return path
