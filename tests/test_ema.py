"""--ema_decay: evaluation, metrics.json and the export are of the average,
which the checkpoint keeps and a resume continues (the two kinds of
engine); every engine averages a warm-started run's own weights."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
from estimator_trainer import models
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError, UsageError
from estimator_trainer.models import cnn
from estimator_trainer.tf2 import migration
import cnn_weights
import engine_params
import serve_export

DECAY = 0.5  # Large steps of the average: it differs from the weights.
STEPS = 4


def _config(model_dir, idx_dir, engine, **overrides):
  return TrainConfig(
      model_dir=str(model_dir), dataset='mnist', idx_dir=str(idx_dir),
      engine=engine, ema_decay=DECAY, global_batch_size=32, shuffle_buffer=0,
      learning_rate=0.01, lr_decay='none', save_checkpoints_steps=1,
      keep_checkpoint_max=STEPS + 1, steps_per_loop=1, **overrides)


def _estimator_names():
  """The CNN's weights' names in an estimator checkpoint."""
  return models.check('cnn', (28, 28, 1), 10)


def _weights(model_dir, step):
  if list(model_dir.glob('model.ckpt-*')):  # The estimator engine's.
    reader = tf.train.load_checkpoint(f'{model_dir}/model.ckpt-{step}')
    return [reader.get_tensor(name) for name in _estimator_names()]
  return cnn_weights.tf2_weights(f'{model_dir}/ckpt-{step}')


def _averages(model_dir, step):
  if list(model_dir.glob('model.ckpt-*')):
    reader = tf.train.load_checkpoint(f'{model_dir}/model.ckpt-{step}')
    return [reader.get_tensor(f'{name}/ExponentialMovingAverage')
            for name in _estimator_names()]
  return cnn_weights.tf2_averages(f'{model_dir}/ckpt-{step}')


def _computed_average(model_dir, steps=STEPS):
  """The average of the weights of every step's checkpoint of model_dir:
  step 1's, then averaged with each next."""
  average = _weights(model_dir, 1)
  for step in range(2, steps + 1):
    average = [DECAY * mean + (1 - DECAY) * weight
               for mean, weight in zip(average, _weights(model_dir, step))]
  return average


# Keras's fit moves the average in updates.py's step as ctl does (checked
# step by step by test_a_warm_started_run_averages_its_own_weights[keras]).
@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_evaluation_and_export_are_of_the_average(tmp_path, mnist_small_dir,
                                                  engine):
  """On 2 mirrored replicas, a run stopped at step 2 and resumed continues its
  average: the checkpoint's is the one computed from the raw weights of
  every step's checkpoint; metrics.json, the export and --mode=evaluate
  are of it."""
  once = tmp_path / 'once'
  # One run, stopped and resumed, carries both properties: a resumed run's
  # weights differ from an uninterrupted run's, --ema_decay or not, so the
  # average checked is of the resumed run's own steps.
  mirrored = {'strategy': 'mirrored', 'cpu_replicas': 2}
  engines.ENGINES[engine].run(_config(once, mnist_small_dir, engine,
                                      train_steps=2, mode='train',
                                      **mirrored))
  engines.ENGINES[engine].run(_config(once, mnist_small_dir, engine,
                                      train_steps=STEPS, **mirrored))
  expected = _computed_average(once)
  for average, computed in zip(_averages(once, STEPS), expected):
    np.testing.assert_allclose(average, computed, rtol=1e-5, atol=1e-7)
  metrics = json.loads((once / 'metrics.json').read_text())
  averaged_loss = cnn_weights.mean_test_loss(expected, mnist_small_dir)
  raw_loss = cnn_weights.mean_test_loss(_weights(once, STEPS), mnist_small_dir)
  print(f'{engine}: metrics.json average_loss {metrics["average_loss"]:.6f}, '
        f'of the averages {averaged_loss:.6f}, of the raw weights '
        f'{raw_loss:.6f}')
  assert abs(raw_loss - averaged_loss) > 1e-3
  assert metrics['average_loss'] == pytest.approx(averaged_loss, rel=1e-5)
  evaluated = engines.ENGINES[engine].run(_config(
      once, mnist_small_dir, engine, train_steps=STEPS, mode='evaluate'))
  assert evaluated['average_loss'] == pytest.approx(averaged_loss, rel=1e-5)
  export, = [path.parent for path in once.glob('export/**/saved_model.pb')]
  model = cnn()
  model.set_weights(expected)
  images = next(iter(sources.IdxSource('mnist', str(mnist_small_dir)).dataset(
      sources.TEST).batch(100)))[0]
  np.testing.assert_allclose(
      serve_export.logits(mnist_small_dir, export),
      model(tf.cast(images, tf.float32) / 255.0).numpy(), rtol=1e-4,
      atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.ENGINES)
def test_a_warm_started_run_averages_its_own_weights(tmp_path, mnist_small_dir,
                                                     engine):
  """Warm-started from another run, the average is of the weights this run
  trains from there (step 1's, then averaged), not of the initializers'
  weights its variables were made with."""
  source, run = tmp_path / 'source', tmp_path / 'run'
  engines.ENGINES[engine].run(dataclasses.replace(_config(
      source, mnist_small_dir, engine, train_steps=3, mode='train'),
                                                  ema_decay=None))
  engines.ENGINES[engine].run(_config(
      run, mnist_small_dir, engine, train_steps=2, mode='train',
      warm_start_from=str(source), seed=7))
  warm, fresh = _weights(source, 3), [w.numpy() for w in cnn(seed=7).weights]
  first = _weights(run, 1)
  assert (np.linalg.norm(first[0] - warm[0]) <
          np.linalg.norm(first[0] - fresh[0]) / 10), 'not warm-started'
  for step, computed in ((1, first), (2, _computed_average(run, 2))):
    for average, expected in zip(_averages(run, step), computed):
      np.testing.assert_allclose(average, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('decay', [0.0, 1.0, 1.5])
def test_ema_decay_outside_0_1_is_a_usage_error(tmp_path, decay):
  with pytest.raises(UsageError, match='--ema_decay must be'):
    TrainConfig(model_dir=str(tmp_path), ema_decay=decay)


@pytest.mark.slow
def test_migrate_carries_the_average(estimator, tmp_path, mnist_small_dir):
  """An estimator run's averages become the ctl job's; without --ema_decay
  migrate names what it cannot place."""
  source, target = tmp_path / 'estimator', tmp_path / 'ctl'
  estimator.train(_config(source, mnist_small_dir, 'estimator',
                          train_steps=2))
  with pytest.raises(TrainerError, match=r'ExponentialMovingAverage'):
    migration.convert(dataclasses.replace(
        _config(tmp_path / 'plain', mnist_small_dir, 'ctl'), ema_decay=None),
                      str(source))
  migration.convert(_config(target, mnist_small_dir, 'ctl'), str(source))
  for carried, average in zip(_averages(target, 2), _averages(source, 2)):
    np.testing.assert_array_equal(carried, average)


@pytest.mark.slow
def test_a_resume_with_ema_of_a_run_without_is_a_usage_error(
    tmp_path, mnist_small_dir):
  config = _config(tmp_path, mnist_small_dir, 'ctl', train_steps=1,
                   mode='train')
  engines.ENGINES['ctl'].run(dataclasses.replace(config, ema_decay=None))
  with pytest.raises(UsageError, match='holds no average'):
    engines.ENGINES['ctl'].run(dataclasses.replace(config, train_steps=2))
