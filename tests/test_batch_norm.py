"""Batch norm's population statistics (--bn_recompute_batches,
batch_norm.py): a model whose batch norm has Keras Applications' momentum
0.999 evaluates at chance after a short run unless they are recomputed, in
both kinds of engine (Estimator's, the TF2 Job's); the recomputed
statistics are those of the global training batches (numpy computes the
same; 1 and 2 replicas agree) and are in the checkpoint; the warning
without them."""

import dataclasses
import json
import logging
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import batch_norm
from estimator_trainer import ema_recipe
from estimator_trainer import engines
from estimator_trainer import examples
from estimator_trainer import make_input_fn
from estimator_trainer import sources
from estimator_trainer import stack
from estimator_trainer.config import TrainConfig
from estimator_trainer.data import ModeKeys
from estimator_trainer.errors import UsageError
from estimator_trainer.tf2 import job as tf2_job
from estimator_trainer.tf2 import migration
import builders
import engine_params
import scripts_dir
import warm_process

pytestmark = pytest.mark.xdist_group('batch_norm')

write_tfrecords = scripts_dir.load('write_tfrecords')
BATCH = 32
STALE = 'leaves the moving statistics'  # Momentum**steps, at the start.
FAR = 'standard deviations from the training data'  # Measured at the end.
EXAMPLES = 192  # Of each split.


class _Colors:
  """3 classes of reddish, greenish and bluish grey images: the colour is
  a small shift of a large common value, which only normalized
  activations show."""

  COLORS = np.array([[150, 110, 110], [110, 150, 110], [110, 110, 150]])

  def __init__(self, side, num_examples=EXAMPLES):
    self.spec = sources.DatasetSpec('colors', (side, side, 3), 3,
                                    ('red', 'green', 'blue'))
    self._num_examples = num_examples

  def dataset(self, split):
    rng = np.random.default_rng(0 if split == sources.TRAIN else 1)
    labels = rng.integers(0, 3, self._num_examples)
    noise = rng.integers(-20, 20, (self._num_examples, *self.spec.image_shape))
    images = np.clip(self.COLORS[labels][:, None, None, :] + noise, 0,
                     255).astype(np.uint8)
    return tf.data.Dataset.from_tensor_slices((images, labels))


def _write(directory, side):
  source = _Colors(side)
  write_tfrecords.write(source, str(directory), 2, examples.ExampleFormat(
      source.spec.image_shape, 3, 'image', 'label'), encoding='png')
  return directory


@pytest.fixture(scope='module')
def colors16(tmp_path_factory):
  return _write(tmp_path_factory.mktemp('colors16'), 16)


def _config(model_dir, data_dir, **overrides):
  return TrainConfig(**{
      'model_dir': str(model_dir), 'train_files': f'{data_dir}/train-*',
      'eval_files': f'{data_dir}/test-*', 'model': builders.bn_cnn,
      'global_batch_size': BATCH, 'learning_rate': 0.005,
      'save_checkpoints_steps': 1000, 'throttle_secs': 0, 'export': 'none',
      **overrides})


def _on(replicas):
  """The strategy flags of `replicas` CPU replicas."""
  return ({'strategy': 'mirrored', 'cpu_replicas': replicas} if replicas > 1
          else {'strategy': 'default', 'cpu_replicas': 0})


# (engine, replicas): every engine on 1, and the two kinds of engine on 2.
ENGINES_AND_REPLICAS = [
    *(engine_params.param(name, 1) for name in engines.ENGINES),
    engine_params.param('estimator', 2), engine_params.param('ctl', 2)]
# The two kinds of engine (engine_params.KINDS): the warning, the check at
# the last step, the recompute and --ema_decay's averages (job.py,
# updates.py) are ctl's code in keras's fit too. Its own micro-batch split:
# test_accumulated_micro_batches_update_the_statistics_in_a_row[keras-1].
KINDS_AND_REPLICAS = [case for case in ENGINES_AND_REPLICAS
                      if case.values[0] != 'keras']


def _train(config):
  """Runs `config`; returns metrics.json. (A test that reads no evaluation
  runs mode train instead: each costs a graph and a pass over the test
  files.)"""
  engines.ENGINES[config.engine].run(config)
  with open(f'{config.model_dir}/metrics.json') as f:
    return json.load(f)


def _restored(config):
  """The builder's model with the latest checkpoint's weights."""
  model = builders.bn_cnn((16, 16, 3), 3, seed=config.seed)
  path = tf.train.latest_checkpoint(config.model_dir)
  if config.engine == 'estimator':
    reader = tf.train.load_checkpoint(path)
    for weight in model.weights:
      weight.assign(reader.get_tensor(weight.name.split(':')[0]))
  else:
    tf.train.Checkpoint(model=model).restore(path).expect_partial()
  return model


def _averaged(config, model):
  """`model` with the latest checkpoint's --ema_decay averages as its
  trainable weights."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(
      config.model_dir))
  for index, weight in enumerate(ema_recipe.averaged(model)):
    weight.assign(reader.get_tensor(
        f'{weight.name.split(":")[0]}/ExponentialMovingAverage'
        if config.engine == 'estimator' else
        f'ema/averages/{index}/.ATTRIBUTES/VARIABLE_VALUE'))
  return model


def _saved_statistics(model):
  return [(layer.moving_mean.numpy(), layer.moving_variance.numpy())
          for layer in (model.get_layer('bn1'), model.get_layer('bn2'))]


def _numpy_statistics(model, config, num_batches):
  """Each batch-norm layer's population mean and variance over the first
  `num_batches` training batches, in numpy from the inputs that Keras's own
  training-mode forward pass gives the layers."""
  layers = (model.get_layer('bn1'), model.get_layer('bn2'))
  inputs_of = tf.keras.Model(model.inputs, [layer.input for layer in layers])
  pooled = [[] for _ in layers]
  for images in _training_batches(config, num_batches):
    for found, x in zip(pooled, inputs_of(images, training=True)):
      found.append(np.asarray(x, np.float64).reshape(-1, x.shape[-1]))
  assert len(pooled[0]) == num_batches
  return [(np.mean(np.concatenate(x), 0), np.var(np.concatenate(x), 0))
          for x in pooled]


def _training_batches(config, num_batches):
  """The first training batches' images, in the order the engine's
  recompute reads them: Estimator's graph has RunConfig(tf_random_seed)'s
  graph-level seed (which orders the shuffle), the TF2 engines' eager
  context none."""
  input_fn = make_input_fn(config, BATCH)  # Reads the files eagerly.
  dataset = lambda: input_fn(ModeKeys.TRAIN).take(num_batches)
  if config.engine != 'estimator':
    return [features['image'] for features, _ in dataset()]
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(config.seed)
    batch = tf.compat.v1.data.make_one_shot_iterator(dataset()).get_next()
    with tf.compat.v1.Session() as session:
      return [session.run(batch)[0]['image'] for _ in range(num_batches)]


def _warnings(caplog, kind):
  return [record.getMessage() for record in caplog.records
          if record.levelno == logging.WARNING and kind in record.message]


@pytest.mark.slow
@pytest.mark.both_stacks
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_recomputed_statistics_make_the_evaluation_right(
    tmp_path, colors16, engine, caplog):
  """Momentum 0.999 over 60 steps keeps 94 % of the initial statistics:
  chance without the recompute, the class colours with it."""
  caplog.set_level(logging.WARNING)
  stale = _train(_config(tmp_path / 'stale', colors16, engine=engine,
                         train_steps=60))
  warnings = _warnings(caplog, STALE)
  assert len(warnings) == 1, warnings
  assert 'momentum 0.999' in warnings[0] and '94 %' in warnings[0]
  assert 'after 60 training steps' in warnings[0]
  assert '--bn_recompute_batches' in warnings[0]
  assert not _warnings(caplog, FAR)  # Said once, at the start.
  assert stale['accuracy'] < 0.5  # Chance: 1/3.

  caplog.clear()
  config = _config(tmp_path / 'precise', colors16, engine=engine,
                   train_steps=60, bn_recompute_batches=4)
  precise = _train(config)
  assert not _warnings(caplog, STALE) and not _warnings(caplog, FAR)
  assert precise['accuracy'] > 0.9
  model = _restored(config)
  for (mean, variance), (want_mean, want_variance) in zip(
      _saved_statistics(model), _numpy_statistics(model, config, 4)):
    np.testing.assert_allclose(mean, want_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(variance, want_variance, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('engine, replicas', KINDS_AND_REPLICAS)
def test_the_average_is_evaluated_with_statistics_recomputed_for_it(
    tmp_path, colors16, engine, replicas):
  """--ema_decay averages the trainable weights; the recompute is of the
  averages, which evaluation (metrics.json) uses: the class colours, not
  chance (averaged stale statistics of momentum 0.999); on 2 replicas, of
  the global batches."""
  config = _config(tmp_path, colors16, engine=engine, train_steps=60,
                   bn_recompute_batches=4, ema_decay=0.9, **_on(replicas))
  assert _train(config)['accuracy'] > 0.9
  model = _averaged(config, _restored(config))
  for (mean, variance), (want_mean, want_variance) in zip(
      _saved_statistics(model), _numpy_statistics(model, config, 4)):
    np.testing.assert_allclose(mean, want_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(variance, want_variance, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_stale_statistics_are_measured_at_the_end(
    tmp_path, colors16, engine, caplog):
  """Momentum 0.99 over 100 steps keeps only 37 % of the initial
  statistics, too little for the warning at the start, yet the moving
  statistics lag the weights and its evaluation loss is far above
  momentum 0.9's:
  the check at the last step measures it. Momentum 0.9 keeps up: no
  warning."""
  caplog.set_level(logging.WARNING)
  results = {}
  for momentum in (0.99, 0.9):
    caplog.clear()
    results[momentum] = _train(_config(
        tmp_path / str(momentum), colors16, engine=engine, train_steps=100,
        model_kwargs={'momentum': momentum}))
    results[momentum]['warnings'] = _warnings(caplog, FAR)
    assert not _warnings(caplog, STALE)
  print(results)
  lagging, keeping_up = results[0.99], results[0.9]
  assert len(lagging['warnings']) == 1
  assert 'at step 100' in lagging['warnings'][0]
  assert '--bn_recompute_batches' in lagging['warnings'][0]
  assert not keeping_up['warnings']
  assert lagging['average_loss'] > 5 * keeping_up['average_loss']


@pytest.mark.slow
@pytest.mark.estimator
def test_the_end_check_on_the_console_of_2_replicas_with_sync_bn(
    tmp_path, mnist_small_dir):
  """The estimator engine's check at the last step under 2 mirrored
  replicas and synchronized batch norm, through the CLI: it reads the
  moving statistics (mirrored variables: read ops made before the graph is
  finalized) and the console holds its line, without AutoGraph's notes on
  Python's import machinery that synchronized batch norm causes there. A
  warm process (a fresh one: AutoGraph notes a function once per process),
  run in the tests' directory, which `python -m` puts on sys.path for
  builders."""
  result = warm_process.run([
      sys.executable, '-m', 'estimator_trainer.run',
      f'--model_dir={tmp_path}', '--dataset=mnist',
      f'--idx_dir={mnist_small_dir}', '--model=builders:unnamed_cnn',
      '--model_kwargs={"momentum": 0.5}', '--strategy=mirrored',
      '--cpu_replicas=2', '--sync_batch_norm', '--train_steps=3',
      '--mode=train', '--export=none'], 300,
      cwd=os.path.dirname(builders.__file__))
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Batch norm at step 3: moving statistics ' in result.stderr
  assert 'AutoGraph' not in result.stderr


@pytest.mark.slow
@pytest.mark.both_stacks
@pytest.mark.parametrize('engine', ['ctl', pytest.param(
    'estimator', marks=pytest.mark.estimator)])
def test_the_statistics_are_the_global_batches_on_2_replicas(
    tmp_path, colors16, engine):
  """The statistics saved on 2 replicas are those of the global batches,
  as numpy computes them (the seeded weights: one SGD step of rate 1e-30):
  those one replica saves, which
  test_recomputed_statistics_make_the_evaluation_right compares with
  numpy's the same way."""
  config = _config(tmp_path, colors16, engine=engine, mode='train',
                   optimizer='sgd', learning_rate=1e-30, lr_decay='none',
                   train_steps=1, bn_recompute_batches=3, **_on(2))
  engines.ENGINES[engine].run(config)
  model = _restored(config)
  for (mean, variance), (want_mean, want_variance) in zip(
      _saved_statistics(model), _numpy_statistics(model, config, 3)):
    np.testing.assert_allclose(mean, want_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(variance, want_variance, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(
    not stack.has_estimator(),
    reason='the most costly test of the module runs on the default stack '
    'only: precise BN on TensorFlow 2.21 is the same code, tested there by '
    'test_recomputed_statistics_make_the_evaluation_right')
def test_keras_applications_mobilenet_v2(tmp_path_factory, tmp_path, caplog):
  """Keras Applications' MobileNetV2 (momentum 0.999) evaluates at chance
  after 60 steps (94 % of the initial statistics left); with its statistics
  recomputed, well. Its initial weights are the seed's; its optimizer plain
  SGD, which has no slots: a step that creates them at its first call is
  traced twice (Adam cost the test 4-5 CPU-seconds more). SGD at rates
  0.05, 0.1 and 0.2 alike recomputed to an accuracy of 1. The recompute
  runs on the checkpoint's model here, not in a resumed run: a second
  trace of the network's training step would cost seconds more, and the
  flag's way through the engines (recomputed before each checkpoint save,
  whatever the first step) is
  test_recomputed_statistics_make_the_evaluation_right's."""
  data_dir = _write(tmp_path_factory.mktemp('colors32'), 32)
  caplog.set_level(logging.WARNING)
  config = _config(tmp_path, data_dir, engine='ctl', mode='train',
                   model=builders.mobilenet_v2, global_batch_size=16,
                   optimizer='sgd', learning_rate=0.1, train_steps=60)
  engines.ENGINES['ctl'].run(config)
  assert len(_warnings(caplog, STALE)) == 1
  model = builders.mobilenet_v2((32, 32, 3), 3, seed=config.seed)
  tf.train.Checkpoint(model=model).restore(
      tf.train.latest_checkpoint(config.model_dir)).expect_partial()
  stale = _accuracy(model, config)
  input_fn = make_input_fn(config, config.global_batch_size)
  batch_norm.Recompute(model, lambda: input_fn(ModeKeys.TRAIN).map(
      lambda features, _: features['image']), 8)()
  recomputed = _accuracy(model, config)
  print(f'MobileNetV2 eval accuracy at step 60: {stale:.4f}, '
        f'{recomputed:.4f} recomputed')
  assert stale < 0.5  # Chance: 1/3.
  assert recomputed > 0.9


def _evaluated(model, config, batch=BATCH):
  """(logits, labels) of `model` (normalizing with its moving statistics)
  on the evaluation files of `config`, in batches of `batch`."""
  logits, labels = [], []
  for features, label in make_input_fn(config, batch)(ModeKeys.EVAL):
    logits.append(model(features['image'], training=False).numpy())
    labels.append(np.reshape(label, [-1]))
  return np.concatenate(logits), np.concatenate(labels)


def _accuracy(model, config):
  # In one batch: each eager call of MobileNetV2 costs about 0.1 CPU-second.
  logits, labels = _evaluated(model, config, EXAMPLES)
  return float(np.mean(np.argmax(logits, -1) == labels))


def test_the_flag_is_a_count_of_batches():
  with pytest.raises(UsageError, match='--bn_recompute_batches must be >= 0'):
    TrainConfig(model_dir='/tmp/x', bn_recompute_batches=-1)
  assert TrainConfig(model_dir='/tmp/x').bn_recompute_batches == 0


def test_a_layer_it_cannot_recompute_is_a_usage_error():
  model = tf.keras.Sequential([
      tf.keras.layers.Input((4,)),
      tf.keras.layers.BatchNormalization(renorm=True, name='renormed')])
  with pytest.raises(UsageError, match='renormed uses renorm'):
    batch_norm.check(model)


@pytest.mark.slow
@pytest.mark.parametrize('engine, replicas', ENGINES_AND_REPLICAS)
def test_accumulated_micro_batches_update_the_statistics_in_a_row(
    tmp_path, colors16, engine, replicas):
  """Frozen weights (SGD of rate 1e-30), momentum 0.9: 3 steps of 4
  accumulated micro-batches leave the moving statistics of 12 plain steps
  on the same batches (updates from the same starting value would scale
  the gap to the batches' by 0.6 a step instead of 0.9**4); on 2 replicas,
  each replica's in a row. On one replica, 12 plain steps of frozen weights
  are Keras's 12 forward passes in training mode, the reference here (each
  engine's plain run left the same statistics, to 5e-7 relative); on 2,
  the engine's own plain run (each engine's replicas update in their own
  way)."""
  def configured(name, micro_batches, steps):
    return _config(tmp_path / name, colors16, engine=engine, mode='train',
                   optimizer='sgd', learning_rate=1e-30, lr_decay='none',
                   shuffle_buffer=0, model_kwargs={'momentum': 0.9},
                   accumulate_steps=micro_batches, train_steps=steps,
                   **_on(replicas))

  accumulated = configured('accumulated', 4, 3)
  engines.ENGINES[engine].run(accumulated)
  if replicas == 1:
    model = builders.bn_cnn((16, 16, 3), 3, seed=accumulated.seed,
                            momentum=0.9)
    for images in _training_batches(accumulated, 12):
      model(images, training=True)
  else:
    plain = configured('plain', 1, 12)
    engines.ENGINES[engine].run(plain)
    model = _restored(plain)
  plain, accumulated = (_saved_statistics(model),
                        _saved_statistics(_restored(accumulated)))
  # The steps' forward passes in training mode moved them off their zeros.
  assert min(np.abs(mean).max() for mean, _ in plain) > 1e-3, plain
  for (mean1, variance1), (mean2, variance2) in zip(plain, accumulated):
    np.testing.assert_allclose(mean2, mean1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(variance2, variance1, rtol=1e-4, atol=1e-5)


def _test_loss(model, config):
  logits, labels = _evaluated(model, config)
  return float(np.mean(tf.keras.losses.sparse_categorical_crossentropy(
      labels, logits, from_logits=True)))


@pytest.mark.slow
@pytest.mark.estimator
def test_a_negligible_average_evaluates_as_the_checkpoint(tmp_path, colors16):
  """--ema_decay=1e-9 on per-replica batch norm of 2 replicas: the average
  is the weights, and metrics.json the checkpoint's own model (statistics
  of every replica, not the first's). One replica's evaluation of the
  averages and the checkpoint's statistics:
  test_an_estimator_checkpoint_averaging_every_weight_migrates."""
  config = _config(tmp_path, colors16, engine='estimator', train_steps=8,
                   ema_decay=1e-9, model_kwargs={'momentum': 0.5}, **_on(2))
  metrics = _train(config)
  np.testing.assert_allclose(metrics['average_loss'],
                             _test_loss(_restored(config), config),
                             rtol=1e-5)


def _averaging_every_weight(config, offset):
  """Rewrites model_dir's latest TF2 checkpoint as --ema_decay wrote it
  before it averaged trainable weights only (issue 46):
  --ema_decay's averages of every weight at its position in model.weights,
  batch norm's statistics included (theirs off by `offset`); returns the
  averages of the trainable weights."""
  job = tf2_job.Job(config)
  job.restore()
  trainable = iter(job.ema.averages)
  old = tf.Module(name='ema')
  old.averages = [tf.Variable(next(trainable) if weight.trainable
                              else weight + offset, trainable=False)
                  for weight in job.model.weights]
  tf.train.CheckpointManager(
      tf.train.Checkpoint(model=job.model, optimizer=job.optimizer, ema=old),
      config.model_dir, max_to_keep=None, checkpoint_name='ckpt').save(
          checkpoint_number=config.train_steps)
  return [average.numpy() for average in job.ema.averages]


@pytest.mark.slow
def test_a_checkpoint_averaging_every_weight_evaluates_and_resumes(
    tmp_path, colors16):
  """--ema_decay before issue 46 averaged batch norm's statistics too, at
  positions that now hold other averages (a resume failed, 'holds a
  checkpoint of another model'): its averages of the trainable weights
  are taken, its statistics' left out, in evaluation and a resumed run."""
  # Mode train: only the evaluation of the rewritten checkpoint is read.
  config = _config(tmp_path, colors16, engine='ctl', mode='train',
                   train_steps=2, ema_decay=0.5,
                   model_kwargs={'momentum': 0.5})
  engines.ENGINES['ctl'].run(config)
  averages = _averaging_every_weight(config, offset=100.0)
  metrics = _train(dataclasses.replace(config, mode='evaluate'))
  model = _restored(config)
  for weight, average in zip(ema_recipe.averaged(model), averages):
    weight.assign(average)
  np.testing.assert_allclose(metrics['average_loss'],
                             _test_loss(model, config), rtol=1e-5)

  config = dataclasses.replace(config, train_steps=3)
  engines.ENGINES['ctl'].run(config)
  weights = ema_recipe.averaged(_restored(config))
  for carried, average, weight in zip(
      ema_recipe.averaged(_averaged(config, _restored(config))), averages,
      weights):
    np.testing.assert_allclose(carried, 0.5 * average + 0.5 * weight,
                               rtol=1e-5, atol=1e-7)


def _with_statistics_averages(config, offset):
  """Adds to model_dir's latest estimator checkpoint the averages of batch
  norm's statistics (their values off by `offset`) that --ema_decay kept
  beside those of the trainable weights before issue 46."""
  path = tf.train.latest_checkpoint(config.model_dir)
  reader = tf.train.load_checkpoint(path)
  names = list(reader.get_variable_to_shape_map())
  statistics = [name for name in names
                if name.endswith(('moving_mean', 'moving_variance'))]
  assert statistics
  with tf.Graph().as_default():
    stored = [tf.compat.v1.Variable(reader.get_tensor(name), name=name)
              for name in names]
    stored += [tf.compat.v1.Variable(reader.get_tensor(name) + offset,
                                     name=f'{name}/ExponentialMovingAverage')
               for name in statistics]
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver(stored).save(session, path,
                                            write_meta_graph=False)


@pytest.mark.slow
@pytest.mark.estimator
def test_an_estimator_checkpoint_averaging_every_weight_migrates(
    tmp_path, colors16):
  """An estimator checkpoint of --ema_decay before issue 46 also holds
  averages of batch norm's statistics: left out in evaluation, a resume
  and `migrate` (which failed: 'cannot place'). First, today's
  checkpoint: its averages evaluated on 2 evaluation replicas
  (--eval_strategy=mirrored, which crashed at the first evaluation); then
  the old checkpoint's averages on one, with the checkpoint's
  statistics."""
  config = _config(tmp_path / 'estimator', colors16, engine='estimator',
                   train_steps=2, ema_decay=0.5,
                   model_kwargs={'momentum': 0.5})
  np.testing.assert_allclose(
      _train(dataclasses.replace(config, eval_strategy='mirrored',
                                 cpu_replicas=2))['average_loss'],
      _test_loss(_averaged(config, _restored(config)), config), rtol=1e-5)
  _with_statistics_averages(config, offset=100.0)
  metrics = _train(dataclasses.replace(config, mode='evaluate'))
  np.testing.assert_allclose(
      metrics['average_loss'],
      _test_loss(_averaged(config, _restored(config)), config), rtol=1e-5)
  migrated = dataclasses.replace(config, model_dir=str(tmp_path / 'ctl'),
                                 engine='ctl')
  migration.convert(migrated, config.model_dir)
  for carried, average in zip(
      _averaged(migrated, _restored(migrated)).weights,
      _averaged(config, _restored(config)).weights):
    np.testing.assert_array_equal(carried, average)
  # The resume, in mode train: no assertion reads its evaluation.
  engines.ENGINES['estimator'].run(dataclasses.replace(
      config, mode='train', train_steps=3))
  assert tf.train.latest_checkpoint(config.model_dir).endswith('-3')
