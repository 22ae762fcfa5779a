"""--seed fixes a user's builder's start (issue 47, item 10): Keras's
initializers given no seed took theirs from Python's generator, so 1 and 2
replicas (and two builds in one process) started from different weights,
while the package's own models, seeded, did not."""

import random

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
from estimator_trainer import models
from estimator_trainer import weights
from estimator_trainer.config import TrainConfig
import engine_params

BUILDER = 'builders:mlp'  # Keras's default initializers, no seed argument.
SHAPE = (28, 28, 1)


def _initial(seed):
  return [w.numpy() for w in models.build(BUILDER, SHAPE, 10,
                                          seed=seed).weights]


def _max_difference(first, second):
  return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))


def test_a_users_builder_starts_from_the_seed_alone():
  first = _initial(7)
  random.random()  # What other code draws in between.
  assert _max_difference(first, _initial(7)) == 0
  with tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1']).scope():
    assert _max_difference(first, _initial(7)) == 0
  assert _max_difference(first, _initial(8)) > 0.01


# The estimator engine and ctl: Keras's fit trains the model that ctl's tf2
# Job builds (models.build with --seed, under the strategy's scope).
@pytest.mark.both_stacks
@pytest.mark.slow
@pytest.mark.parametrize('engine', [engine_params.param('estimator'),
                                    engine_params.param('ctl')])
def test_one_and_two_replicas_start_alike_in_every_engine(
    tmp_path, mnist_small_dir, engine):
  """One step at a rate of 1e-30: the checkpoint holds the start."""
  values = []
  for strategy in ('default', 'mirrored'):
    model_dir = tmp_path / strategy
    engines.ENGINES[engine].run(TrainConfig(
        model_dir=str(model_dir), engine=engine, strategy=strategy,
        idx_dir=str(mnist_small_dir), model=BUILDER, seed=7, train_steps=1,
        learning_rate=1e-30, lr_decay='none', global_batch_size=32,
        mode='train', export='none'))
    values.append(weights.read_weights(
        tf.train.latest_checkpoint(str(model_dir)),
        models.check(BUILDER, SHAPE, 10),
        lambda: models.build(BUILDER, SHAPE, 10)))
  assert _max_difference(*values) < 1e-6
