"""model_fn: the TRAIN, EVAL and PREDICT graphs of the Keras model under
Estimator, with the package's loss scaling and eval metrics."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer.config import ModelParams
from estimator_trainer.sources import CLASS_NAMES
from estimator_trainer.metrics import EvalMetrics
from estimator_trainer.model import create_model
from estimator_trainer.optimizers import OptimizerSpec

ModeKeys = tf.estimator.ModeKeys


def train_op(optimizer, loss, variables):
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


def model_fn(features, labels, mode, params):
  """Estimator model_fn for TRAIN, EVAL and PREDICT.

  `features` is `{'image': float32 [batch, 28, 28, 1]}` (EVAL may add a
  `'weight'` per example, 0 for padding); `params` is a dict of
  `config.ModelParams`' fields (`global_batch_size` required).
  """
  params = ModelParams.from_dict(params)
  model = create_model(seed=params.seed, weight_decay=params.weight_decay,
                       precision=params.precision)
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
    # Image summaries are rendered by tf.py_function, so they cannot be in
    # graphs saved for another process (TFMA).
    metrics = EvalMetrics(CLASS_NAMES[params.dataset]
                          if params.eval_images else None)
    # A per-replica mean, not a share of the global batch: Estimator averages
    # the replicas' `loss`. `average_loss` is exact over the whole test set.
    return tf.estimator.EstimatorSpec(
        mode, loss=losses.weighted_mean_loss(labels, logits, weights),
        eval_metric_ops=metrics.update(features['image'], labels, logits,
                                       weights))

  loss = losses.replica_training_loss(labels, logits,
                                      params.global_batch_size, model.losses)
  optimizer, learning_rate = OptimizerSpec.from_params(params).v1()
  # v1 summaries: written for the first replica only, at save_summary_steps.
  tf.compat.v1.summary.scalar('learning_rate', learning_rate)
  tf.compat.v1.summary.scalar('accuracy', tf.reduce_mean(
      tf.cast(tf.equal(predictions['classes'], labels), tf.float32)))
  return tf.estimator.EstimatorSpec(
      mode, loss=loss,
      train_op=train_op(optimizer, loss, model.trainable_variables))
