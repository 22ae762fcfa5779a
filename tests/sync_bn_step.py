"""Helper of test_own_model_and_data, run in its own process (collective
all-reduces of several strategies and dtypes in one process conflict): the
gradient of one step of MODEL (a --model value; ResNet-20 by default) on 1
and on 2 replicas (same global batch of 32, the package's loss scaling), and
prints the largest relative difference
of a variable's gradient. `reordered` instead compares 1 replica with 1
replica fed the same batch in another order: what rounding alone moves.
`sync,per_replica` prints both, a line each, from one process (one
1-replica gradient: on one device the statistics are the batch's either
way; two MirroredStrategies of one dtype do not conflict).

    python sync_bn_step.py float64|float32 sync|per_replica|reordered [MODEL]
"""

import sys

import numpy as np
import tensorflow as tf

from estimator_trainer import losses
from estimator_trainer import models
from estimator_trainer.strategy import configure_cpu_replicas


def gradients(model_name, strategy, precision, sync_batch_norm, images,
              labels):
  with strategy.scope():
    model = models.build(model_name, images.shape[1:], 10, seed=1,
                         precision=precision,
                         sync_batch_norm=sync_batch_norm)

  def step(x, y):
    with tf.GradientTape() as tape:
      loss = losses.replica_training_loss(y, model(x, training=True), 32)
    return tape.gradient(loss, model.trainable_variables)

  dataset = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensor_slices((images, labels)).batch(32))
  x, y = next(iter(dataset))
  per_replica = tf.function(lambda x, y: strategy.run(step, (x, y)))(x, y)
  return [strategy.reduce('SUM', g, axis=None).numpy() for g in per_replica]


def main(precision, mode, model_name='resnet20'):
  configure_cpu_replicas(2)
  rng = np.random.default_rng(0)
  images = rng.random((32, 28, 28, 1)).astype(precision)
  labels = rng.integers(0, 10, 32)
  one_device = tf.distribute.OneDeviceStrategy('/cpu:0')
  one = gradients(model_name, one_device, precision, mode != 'per_replica',
                  images, labels)
  for each in mode.split(','):
    if each == 'reordered':
      order = rng.permutation(len(images))
      two = gradients(model_name, one_device, precision, True, images[order],
                      labels[order])
    else:
      two = gradients(model_name,
                      tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1']),
                      precision, each == 'sync', images, labels)
    print(max(float(np.linalg.norm(a - b) / np.linalg.norm(a))
              for a, b in zip(one, two)))


if __name__ == '__main__':
  main(*sys.argv[1:])
