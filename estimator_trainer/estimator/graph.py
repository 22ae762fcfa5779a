"""model_fn: the TRAIN, EVAL and PREDICT graphs of a Keras model under
Estimator, with the package's loss scaling and eval metrics."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import models
from estimator_trainer.estimator.params import ModelParams
from estimator_trainer.metrics import EvalMetrics
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


def make_model_fn(build_model=models.cnn, **model_kwargs):
  """An Estimator model_fn (TRAIN, EVAL, PREDICT) of any builder:
  `build_model(input_shape, num_classes, **model_kwargs)` -> Keras model
  (models.py), or a --model name.

  The model_fn expects `features = {'image': float32 [batch, H, W, C]}`
  (EVAL may add a `'weight'` per example, 0 for padding) and `params`, a dict
  of `config.ModelParams`' fields (`global_batch_size` required).
  """
  def model_fn(features, labels, mode, params):
    params = ModelParams.from_dict(params)
    images = features['image']
    model = models.build(build_model, images.shape[1:],
                         len(params.class_names), model_kwargs,
                         seed=params.seed, precision=params.precision,
                         sync_batch_norm=params.sync_batch_norm,
                         weight_decay=params.weight_decay)
    logits = model(images, training=mode == ModeKeys.TRAIN)
    predictions = models.predictions(logits)
    if mode == ModeKeys.PREDICT:
      return tf.estimator.EstimatorSpec(
          mode, predictions=predictions,
          export_outputs={'serving_default':
                          tf.estimator.export.PredictOutput(predictions)})

    if mode == ModeKeys.EVAL:
      weights = features.get('weight', tf.ones_like(labels, tf.float32))
      # Image summaries are rendered by tf.py_function, so they cannot be in
      # graphs saved for another process (TFMA).
      metrics = EvalMetrics(params.class_names if params.eval_images
                            else None, images.shape[1:])
      # A per-replica mean, not a share of the global batch: Estimator
      # averages the replicas' `loss`. `average_loss` is exact over the whole
      # test set.
      return tf.estimator.EstimatorSpec(
          mode, loss=losses.weighted_mean_loss(labels, logits, weights),
          eval_metric_ops=metrics.update(images, labels, logits, weights))

    loss = losses.replica_training_loss(labels, logits,
                                        params.global_batch_size, model.losses)
    optimizer, learning_rate = OptimizerSpec.from_params(params).v1()
    # v1 summaries: written for the first replica only, at save_summary_steps.
    tf.compat.v1.summary.scalar('learning_rate', learning_rate)
    tf.compat.v1.summary.scalar('accuracy', tf.reduce_mean(
        tf.cast(tf.equal(predictions['classes'], labels), tf.float32)))
    # Keras layers' own updates (batch norm's moving statistics) are not in
    # a v1 graph's train op unless put there.
    with tf.control_dependencies(model.get_updates_for(images) +
                                 model.get_updates_for(None)):
      return tf.estimator.EstimatorSpec(
          mode, loss=loss,
          train_op=train_op(optimizer, loss, model.trainable_variables))

  return model_fn


# The seeds' CNN: what the CLI trains by default.
model_fn = make_model_fn()
