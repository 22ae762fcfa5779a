"""--precision=mixed_float16: dynamic loss scaling in every engine, on 2
mirrored replicas (float16 runs on CPU, slowly: a few steps)."""

import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from estimator_trainer import engines
from estimator_trainer import loss_scale
from estimator_trainer import stack
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError, UsageError
from estimator_trainer.models import cnn
from estimator_trainer.tf2 import migration
from cluster_launch import launch
from overflow_site import one_replica_overflow
import engine_params
import tabular_sets
import test_wide_deep_optimizers as wide_deep

# Overflows the CNN's float16 gradients of a batch of 32 (their largest is
# about 2**-5 x the scale; float16's largest is 65504 < 2**16): the first
# steps are skipped until the scale is small enough.
OVERFLOWING_SCALE = 2.0**26
GROWTH_STEPS = 4
# From FEW_OVERFLOWS_SCALE every engine's steps 1-3, 6 and 7 overflow and
# step 11 doubles the scale (its 4th good step in a row); the loss falls by
# 30% by step 12.
STEPS = 12
# Overflows a few steps less at the CNN's batch of 32 on 2 replicas (2**21
# overflowed, 2**20 did not, at 2**26's 6th and 7th steps): the tests of
# that batch skip some steps and apply more in fewer steps than from 2**26.
# 2**23, defined where the cluster tasks' sitecustomize reads it too.
FEW_OVERFLOWS_SCALE = one_replica_overflow.INITIAL_SCALE
# On the PYTHONPATH of cluster tasks: their scale starts at
# FEW_OVERFLOWS_SCALE, and one step overflows on replica 1 alone.
OVERFLOW_SITE = pathlib.Path(__file__).parent / 'overflow_site'
_SCALE_KEY = ('optimizer/loss_scale/current_loss_scale/.ATTRIBUTES/'
              'VARIABLE_VALUE')


def _summaries(directory, tag):
  """step -> value of the `tag` summaries in `directory`'s event files."""
  accumulator = event_accumulator.EventAccumulator(  # All, not a sample.
      str(directory), size_guidance={event_accumulator.TENSORS: 0,
                                     event_accumulator.SCALARS: 0})
  accumulator.Reload()
  if tag in accumulator.Tags()['scalars']:
    return {event.step: event.value for event in accumulator.Scalars(tag)}
  return {event.step: float(tf.make_ndarray(event.tensor_proto))
          for event in accumulator.Tensors(tag)}


def _weights(model_dir, engine):
  model = cnn()
  path = tf.train.latest_checkpoint(str(model_dir))
  if engine == 'estimator':
    reader = tf.train.load_checkpoint(path)
    with tf.Graph().as_default():
      names = [w.name.split(':')[0] for w in cnn().weights]
    return [reader.get_tensor(name) for name in names]
  tf.train.Checkpoint(model=model).restore(path).expect_partial()
  return [w.numpy() for w in model.weights]


# The TF2 engines: keras, on both stacks. The skip, the scale and the
# skipped steps' count are updates.py's step (Keras's LossScaleOptimizer
# under it), which ctl's loop calls as fit's train_step does; ctl's loop in
# float16: test_clip_and_accumulate's all-controls case.
@pytest.mark.slow
@pytest.mark.parametrize('engine', [
    engine_params.param('estimator'),
    engine_params.param('keras', both_stacks=True)])
def test_an_overflowing_step_is_skipped_and_the_scale_adapts(
    tmp_path, mnist_small_dir, engine, monkeypatch):
  """Step 1 overflows on both replicas: nothing applied, the step counted,
  the scale halved; a resume keeps the scale; later the scale halves on
  each overflow and doubles after GROWTH_STEPS good steps; the loss falls.
  In the estimator engine a step that overflows on replica 1 alone
  (one_replica_overflow) is skipped too: one decision from every replica's
  finiteness (across workers: test_estimator_float16_on_two_workers_...)."""
  monkeypatch.setattr(loss_scale, 'INITIAL_SCALE', FEW_OVERFLOWS_SCALE)
  monkeypatch.setattr(loss_scale, 'GROWTH_STEPS', GROWTH_STEPS)
  if engine == 'estimator':
    monkeypatch.setattr(
        loss_scale.V1LossScale, 'unscaled',
        one_replica_overflow.overflowing(loss_scale.V1LossScale.unscaled))

  def train(steps):
    config = TrainConfig(
        model_dir=str(tmp_path), dataset='mnist', idx_dir=str(mnist_small_dir),
        engine=engine, mode='train', precision='mixed_float16',
        strategy='mirrored', cpu_replicas=2, global_batch_size=32,
        shuffle_buffer=0, train_steps=steps, save_summary_steps=1,
        steps_per_loop=1, learning_rate=5e-3, lr_decay='none')
    engines.ENGINES[engine].run(config)

  train(1)
  initial = [w.numpy() for w in cnn(seed=42).weights]
  for skipped, start in zip(_weights(tmp_path, engine), initial):
    np.testing.assert_array_equal(skipped, start)
  train(STEPS)
  trace = _summaries(tmp_path, 'loss_scale')
  print(f'{engine} loss_scale trace (step: scale):',
        {step: trace[step] for step in sorted(trace)})
  assert sorted(trace) == list(range(1, STEPS + 1))
  assert trace[1] == FEW_OVERFLOWS_SCALE / 2  # Skipped.
  assert trace[2] == FEW_OVERFLOWS_SCALE / 4  # Resumed at the saved scale.
  if engine == 'estimator':
    overflowed = one_replica_overflow.STEP + 1  # Replica 1's alone.
    assert trace[overflowed] == trace[overflowed - 1] / 2
  scales = [FEW_OVERFLOWS_SCALE] + [trace[step] for step in sorted(trace)]
  changes = [after / before for before, after in zip(scales, scales[1:])]
  assert set(changes) == {0.5, 1.0, 2.0}, changes
  # Exactly every GROWTH_STEPS-th good step in a row doubles the scale (a
  # run's GROWTH_STEPS - 1 unchanged scales, then the doubling), not
  # merely after at least GROWTH_STEPS - 1 unchanged: the recipe replayed
  # from where the steps overflowed.
  expected, good = [], 0
  for change in changes:
    good = 0 if change == 0.5 else good + 1
    expected.append(0.5 if change == 0.5 else
                    2.0 if good == GROWTH_STEPS else 1.0)
    good %= GROWTH_STEPS
  assert changes == expected
  skipped = changes.count(0.5)
  assert 1 < skipped < STEPS * 3 // 4
  assert _summaries(tmp_path, 'skipped_steps')[STEPS] == skipped
  losses = _summaries(tmp_path, 'loss')
  print(f'{engine} loss at step 1 and {STEPS}:', losses[1], losses[STEPS])
  assert losses[STEPS] < 0.9 * losses[1], losses


@pytest.mark.parametrize('precision', ['mixed_float16', 'mixed_bfloat16'])
def test_estimator_mixed_precision_refuses_parameter_servers(tmp_path,
                                                             precision):
  """Keras refuses mixed_float16 under Estimator's ParameterServerStrategyV1
  (a ValueError from the model); bfloat16 failed at its first step."""
  with pytest.raises(UsageError, match=f'--precision={precision}: '
                     '--engine=estimator trains in float32 under '
                     '--strategy=parameter_server'):
    TrainConfig(model_dir=str(tmp_path), engine='estimator',
                precision=precision, strategy='parameter_server')


@pytest.mark.slow
@pytest.mark.estimator
@pytest.mark.serial  # A cluster on free ports.
def test_estimator_float16_on_two_workers_skips_as_one_process(
    tmp_path, mnist_small_dir, monkeypatch):
  """2 multi_worker_mirrored workers from an overflowing scale skip the
  steps 2 mirrored replicas of one process skip, step by step, and a step
  that overflows on replica 1 (worker 1) alone (one_replica_overflow) too:
  each worker decides from the replicas' summed gradient, not from its own
  (worker 0 would apply that step and wait for worker 1's all-reduce).
  The trace of 2 mirrored replicas in one process, which this test ran
  beside the cluster until issue 48, is written out instead (one estimator
  run less); that one process skips a step overflowing on replica 1 alone:
  test_an_overflowing_step_is_skipped_and_the_scale_adapts[estimator]."""
  steps = 5
  flags = dict(engine='estimator', precision='mixed_float16',
               global_batch_size=32, train_steps=steps, optimizer='sgd',
               learning_rate=0.05, lr_decay='none', shuffle_buffer=0,
               export='none', seed=42, save_summary_steps=1)
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
      [str(OVERFLOW_SITE), os.environ.get('PYTHONPATH', '')]))
  two = launch(['--workers=2'], [
      f'--model_dir={tmp_path}', '--dataset=mnist',
      f'--idx_dir={mnist_small_dir}', '--strategy=multi_worker_mirrored',
      '--cluster_timeout_secs=120',
      *(f'--{name}={value}' for name, value in flags.items())])
  assert two.returncode == 0, two.stdout[-5000:]
  trace = _summaries(tmp_path, 'loss_scale')
  print(f'loss_scale trace (step: scale) of 2 workers: {trace}')
  # Steps 1-3 overflow on both replicas (the initial weights at 2**23 to
  # 2**21), step 4 on replica 1 alone; step 5 applies.
  halvings = one_replica_overflow.STEP + 1
  assert trace == {step: FEW_OVERFLOWS_SCALE / 2**min(step, halvings)
                   for step in range(1, steps + 1)}
  assert _summaries(tmp_path, 'skipped_steps')[steps] == halvings


@pytest.mark.slow
def test_migrate_carries_adam_and_the_loss_scale_into_a_float16_run(
    estimator, tmp_path, mnist_small_dir, monkeypatch):
  """A float32 Estimator's Adam moments go to the loss-scaling optimizer's
  inner one (at the initial scale); a float16 Estimator's scale, good and
  skipped steps go along too (2 overflowing steps: 2 halvings), and without
  --precision=mixed_float16 migrate names the flag."""
  def config(model_dir, **overrides):
    return TrainConfig(model_dir=str(model_dir), dataset='mnist',
                       idx_dir=str(mnist_small_dir), global_batch_size=32,
                       train_steps=2, mode='train', **overrides)
  estimator.train(config(tmp_path / 'estimator', engine='estimator'))
  migration.convert(config(tmp_path / 'ctl', engine='ctl',
                           precision='mixed_float16'),
                    str(tmp_path / 'estimator'))
  moment = tf.train.load_checkpoint(str(tmp_path / 'estimator/model.ckpt-2')
                                    ).get_tensor('conv1/kernel/Adam')
  carried = tf.train.load_checkpoint(str(tmp_path / 'ctl/ckpt-2'))
  assert np.abs(moment).max() > 0
  np.testing.assert_array_equal(carried.get_tensor(
      'optimizer/_variables/1/.ATTRIBUTES/VARIABLE_VALUE'), moment)  # conv1's m.
  assert carried.get_tensor(_SCALE_KEY) == loss_scale.INITIAL_SCALE

  monkeypatch.setattr(loss_scale, 'INITIAL_SCALE', OVERFLOWING_SCALE)
  estimator.train(config(tmp_path / 'estimator16', engine='estimator',
                         precision='mixed_float16'))
  with pytest.raises(TrainerError, match='give migrate --precision='
                     'mixed_float16'):
    migration.convert(config(tmp_path / 'ctl32', engine='ctl'),
                      str(tmp_path / 'estimator16'))
  migration.convert(config(tmp_path / 'ctl16', engine='ctl',
                           precision='mixed_float16'),
                    str(tmp_path / 'estimator16'))
  carried = tf.train.load_checkpoint(str(tmp_path / 'ctl16/ckpt-2'))
  assert carried.get_tensor(_SCALE_KEY) == OVERFLOWING_SCALE / 4
  assert carried.get_tensor(
      'optimizer/loss_scale/good_steps/.ATTRIBUTES/VARIABLE_VALUE') == 0
  assert carried.get_tensor(
      'skipped_steps/.ATTRIBUTES/VARIABLE_VALUE') == 2


@pytest.fixture(scope='module')
def census(tmp_path_factory):
  return tabular_sets.write(tmp_path_factory.mktemp('tabular'))['census']


@pytest.mark.slow
def test_wide_and_deep_parts_step_in_float16_alike_in_both_engines(
    census, tmp_path):
  """Canned wide & deep's two optimizers, each with its own loss scale: one
  float16 step moves every weight, the same in the ctl and estimator
  engines. (Their float32 steps alike: test_wide_deep_optimizers.py.)"""
  engines_run = ['ctl'] + (['estimator'] if stack.has_estimator() else [])
  steps = {engine: wide_deep.changes(
      tmp_path / engine, census, engine, precision='mixed_float16',
      **wide_deep.CANNED) for engine in engines_run}
  reference = steps['ctl']
  for name, change in reference.items():
    assert np.linalg.norm(change) > 0, f'{name} did not train'
  for engine, step in steps.items():
    score = wide_deep._relative(  # pylint: disable=protected-access
        step, reference, reference)
    print(f'{engine}: {score:.1e} from ctl in float16')
    assert score < 1e-3, engine
