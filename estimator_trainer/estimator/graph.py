"""model_fn: the TRAIN, EVAL and PREDICT graphs of the Keras model under
Estimator, with the package's loss scaling and eval metrics."""

import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import progress
from estimator_trainer import summaries
from estimator_trainer.data import CLASS_NAMES
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
  `'weight'` per example, 0 for padding); `params` holds `optimizer`,
  `learning_rate`, `global_batch_size` and optionally `lr_decay` ('cosine'
  needs `decay_steps`), `seed`, `weight_decay`.
  """
  model = create_model(seed=params.get('seed'),
                       weight_decay=params.get('weight_decay', 0.0),
                       precision=params.get('precision', 'float32'))
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
    metrics = {
        'accuracy': tf.compat.v1.metrics.accuracy(
            labels, predictions['classes'], weights=weights),
        'average_loss': tf.compat.v1.metrics.mean(
            losses.per_example_loss(labels, logits), weights=weights),
        'num_examples': num_examples,
    }
    # Image summaries (strings, left out of metrics.json). Rendered by
    # tf.py_function, so not in graphs saved for another process (TFMA).
    if params.get('eval_images', True):
      class_names = CLASS_NAMES[params.get('dataset', 'mnist')]
      metrics['confusion_matrix'] = summaries.ConfusionMatrixImage(
          class_names)
      metrics['confusion_matrix'].update_state(labels, predictions['classes'],
                                               weights)
      metrics['misclassified'] = summaries.MisclassifiedImage(class_names)
      metrics['misclassified'].update_state(
          features['image'], labels, predictions['classes'], weights)
    # A per-replica mean, not a share of the global batch: Estimator averages
    # the replicas' `loss`. `average_loss` is exact over the whole test set.
    return tf.estimator.EstimatorSpec(
        mode, loss=losses.weighted_mean_loss(labels, logits, weights),
        eval_metric_ops=metrics)

  loss = losses.replica_training_loss(labels, logits,
                                      params['global_batch_size'],
                                      model.losses)
  optimizer, learning_rate = OptimizerSpec.from_params(params).v1()
  # v1 summaries: written for the first replica only, at save_summary_steps.
  tf.compat.v1.summary.scalar('learning_rate', learning_rate)
  tf.compat.v1.summary.scalar('accuracy', tf.reduce_mean(
      tf.cast(tf.equal(predictions['classes'], labels), tf.float32)))
  tf.compat.v1.add_to_collection(progress.REPLICA_LOSSES, loss)
  return tf.estimator.EstimatorSpec(
      mode, loss=loss,
      train_op=train_op(optimizer, loss, model.trainable_variables))

