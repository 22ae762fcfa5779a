"""The user's model and data: ResNet-20 and TFDS datasets of other shapes
(TFDS's mock data), a builder from a module, PNG TFRecords in TF-Slim's
schema, batch norm's moving statistics, synchronized batch norm."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from estimator_trainer import engines
from estimator_trainer import examples
from estimator_trainer import make_input_fn
from estimator_trainer import models
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
import builders
import cli_config
import engine_params
import scripts_dir
import warm_process
from conftest import MNIST_SMALL_TEST_EXAMPLES

TESTS = pathlib.Path(__file__).resolve().parent
write_tfrecords = scripts_dir.load('write_tfrecords')


def _metrics(model_dir):
  return json.loads((pathlib.Path(model_dir) / 'metrics.json').read_text())


def _checkpoint_shapes(model_dir):
  return dict(tf.train.list_variables(tf.train.latest_checkpoint(
      str(model_dir))))


# The two kinds of engine: keras's fit trains ctl's tf2 Job, on the same
# input_fn (TFDS, crop_flip) and build; its loop is test_engines' on the CNN,
# its batch-norm updates test_batch_norm's.
@pytest.mark.slow
@pytest.mark.parametrize('engine', [engine_params.param('estimator'),
                                    engine_params.param('ctl')])
def test_resnet20_on_cifar10_through_both_kinds_of_engine(tmp_path, engine):
  """32x32x3 images, 10 classes, batch norm: TFDS's mock cifar10."""
  with tfds.testing.mock_data(num_examples=48):
    config = TrainConfig(model_dir=str(tmp_path), engine=engine,
                         dataset='cifar10', data_source='tfds',
                         model='resnet20', augment='crop_flip',
                         batch_size_per_replica=8, train_steps=6,
                         save_checkpoints_steps=6, throttle_secs=0,
                         export='none')  # No test reads it.
    engines.ENGINES[engine].run(config)
  metrics = _metrics(tmp_path)
  assert metrics['num_examples'] == 48 and metrics['global_step'] == 6
  assert 0 <= metrics['accuracy'] <= 1
  assert np.isfinite(metrics['loss'])
  if engine == 'estimator':
    shapes = _checkpoint_shapes(tmp_path)
    assert shapes['conv0/kernel'] == [3, 3, 3, 16]
    assert shapes['logits/kernel'] == [64, 10]


def test_a_100_class_dataset(estimator, tmp_path):
  """cifar100's 100 classes reach the logits, metrics and eval images."""
  with tfds.testing.mock_data(num_examples=40):
    config = TrainConfig(model_dir=str(tmp_path), dataset='cifar100',
                         data_source='tfds', batch_size_per_replica=8,
                         train_steps=3, throttle_secs=0, export='none')
    estimator.train_and_evaluate(config)
  assert _checkpoint_shapes(tmp_path)['logits/kernel'] == [64, 100]
  assert _metrics(tmp_path)['num_examples'] == 40


def _cli(*argv, env=None):
  """The command with `env` added to this process's: a warm process
  (warm_process.py; TF_CONFIG is read at run time) in the tests'
  directory, which `python -m` puts on sys.path for builders. A builder
  found through PYTHONPATH by a cold CLI: test_bad_input.py's
  builder-wrong-logits-shape (REAL_CLI)."""
  return warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.run', *argv], 600,
      env={**os.environ, **(env or {})}, cwd=str(TESTS))


def _run(capfd, *argv):
  """`python -m estimator_trainer.run ARGV` in this process: (exit code,
  stderr). What the process adds, absl's start-up and a module found on
  PYTHONPATH, the real CLI's tests check (test_bad_input's REAL_CLI,
  test_model_dir_record)."""
  return cli_config.main_in_process(argv, capfd)


@pytest.mark.slow
@pytest.mark.estimator
def test_a_builder_from_a_module_through_the_cli(tmp_path, mnist_small_dir,
                                                capfd):
  model_dir = tmp_path / 'model'
  code, stderr = _run(capfd, f'--model_dir={model_dir}', '--dataset=mnist',
                      f'--idx_dir={mnist_small_dir}', '--model=builders:mlp',
                      '--model_kwargs={"hidden": 16}', '--train_steps=150',
                      '--export=final')
  assert code == 0, stderr[-3000:]
  assert _checkpoint_shapes(model_dir)['hidden/kernel'] == [784, 16]
  assert _metrics(model_dir)['accuracy'] > 0.5  # Chance: 0.1.
  assert list((model_dir / 'export' / 'final').iterdir())
  # Another model on that model_dir fails up front, naming both.
  code, stderr = _run(capfd, f'--model_dir={model_dir}', '--dataset=mnist',
                      f'--idx_dir={mnist_small_dir}', '--mode=evaluate',
                      '--model=cnn')
  assert code == 2
  assert stderr.strip().splitlines()[-1] == (
      f'error: --model=cnn disagrees with {model_dir}, whose checkpoints are '
      'of --model=builders:mlp (its model.json): drop the flag, or use '
      'another --model_dir')


@pytest.mark.parametrize('engine', engine_params.ENGINES)
def test_every_engine_takes_the_builder_itself(tmp_path, mnist_small_dir,
                                               engine):
  """The Python API: the builder function in TrainConfig, not its name."""
  config = TrainConfig(model_dir=str(tmp_path), engine=engine,
                       dataset='mnist', idx_dir=str(mnist_small_dir),
                       model=builders.mlp, model_kwargs={'hidden': 16},
                       train_steps=150, throttle_secs=0,
                       export='none')  # No test reads it.
  engines.ENGINES[engine].run(config)
  assert _metrics(tmp_path)['accuracy'] > 0.5  # Chance: 0.1.
  recorded = json.loads((tmp_path / 'model.json').read_text())
  assert recorded['model'] == 'builders:mlp'
  assert recorded['model_kwargs'] == {'hidden': 16}


def test_a_model_that_is_neither_name_nor_builder_is_a_usage_error():
  with pytest.raises(UsageError, match='--model must be a name, '
                     'MODULE:FUNCTION or a builder function, got 3'):
    TrainConfig(model_dir='/tmp/x', model=3)


def test_make_model_fn_in_a_pipeline_of_its_own(estimator, tmp_path, mnist_small_dir):
  """A pipeline that builds its own Estimator from make_model_fn."""
  config = TrainConfig(model_dir=str(tmp_path), dataset='mnist',
                       idx_dir=str(mnist_small_dir), train_steps=150)
  source = sources.make_source(config)
  own = tf.estimator.Estimator(
      estimator.make_model_fn(builders.mlp, hidden=16),
      model_dir=str(tmp_path),
      params=estimator.model_params(config, 64, 150, source.spec))
  input_fn = make_input_fn(config, 64, source)
  own.train(input_fn, max_steps=150)
  result = own.evaluate(input_fn)
  assert result['num_examples'] == MNIST_SMALL_TEST_EXAMPLES
  assert result['accuracy'] > 0.5
  assert {'confusion_matrix', 'misclassified'} <= set(result)


class _Colors:
  """16x16 RGB images whose class is their color: 4 classes."""

  spec = sources.DatasetSpec('colors', (16, 16, 3), 4,
                             ('red', 'green', 'blue', 'gray'))
  COLORS = np.array([[200, 30, 30], [30, 200, 30], [30, 30, 200],
                     [120, 120, 120]])

  def __init__(self, num_examples):
    self._num_examples = num_examples

  def dataset(self, split):
    rng = np.random.default_rng(0 if split == sources.TRAIN else 1)
    labels = rng.integers(0, 4, self._num_examples)
    noise = rng.integers(-20, 20, (self._num_examples, 16, 16, 3))
    images = np.clip(self.COLORS[labels][:, None, None, :] + noise, 0,
                     255).astype(np.uint8)
    return tf.data.Dataset.from_tensor_slices((images, labels))


SLIM_KEYS = ['--image_key=image/encoded', '--label_key=image/class/label']


@pytest.fixture(scope='module')
def png_tfrecords(tmp_path_factory):
  """PNG-encoded RGB images under TF-Slim's keys, 4 classes, a spec file."""
  directory = tmp_path_factory.mktemp('png_tfrecords')
  example_format = examples.ExampleFormat(
      (16, 16, 3), 4, 'image/encoded', 'image/class/label')
  write_tfrecords.write(_Colors(256), str(directory), 2, example_format,
                        encoding='png')
  return directory


@pytest.mark.slow
@pytest.mark.estimator
def test_png_tfrecords_in_tf_slim_keys(tmp_path, png_tfrecords, capfd):
  model_dir = tmp_path / 'model'
  code, stderr = _run(capfd, f'--model_dir={model_dir}',
                      f'--train_files={png_tfrecords}/train-*',
                      f'--eval_files={png_tfrecords}/test-*', *SLIM_KEYS,
                      '--train_steps=60', '--batch_size_per_replica=16',
                      '--learning_rate=0.003', '--export=none')
  assert code == 0, stderr[-3000:]
  metrics = _metrics(model_dir)
  assert metrics['num_examples'] == 256
  assert metrics['accuracy'] > 0.9  # Chance: 0.25; colors are easy.
  assert _checkpoint_shapes(model_dir)['logits/kernel'] == [64, 4]


def test_a_label_out_of_range_is_a_data_error_naming_the_file(
    tmp_path, png_tfrecords, capfd):
  model_dir = tmp_path / 'model'
  code, stderr = _run(capfd, f'--model_dir={model_dir}',
                      f'--train_files={png_tfrecords}/train-*',
                      f'--eval_files={png_tfrecords}/test-*', *SLIM_KEYS,
                      '--num_classes=3', '--train_steps=5')
  assert code == 1
  last = stderr.strip().splitlines()[-1]
  assert last.startswith('error: ') and 'label outside [0, 3)' in last, last
  assert 'train-0000' in last


def test_an_image_of_another_shape_is_a_data_error_naming_the_file(
    tmp_path, png_tfrecords, capfd):
  code, stderr = _run(capfd, f'--model_dir={tmp_path / "model"}',
                      f'--train_files={png_tfrecords}/train-*',
                      f'--eval_files={png_tfrecords}/test-*', *SLIM_KEYS,
                      '--image_shape=12,12,3', '--model=builders:mlp',
                      '--train_steps=5')
  assert code == 1
  last = stderr.strip().splitlines()[-1]
  assert 'image/encoded: image not of shape [12, 12, 3] in' in last, last
  assert 'train-0000' in last


_TRAIN_2_STEPS = ['--train_steps=2', '--batch_size_per_replica=16',
                  '--export=none', '--model=builders:mlp']


@pytest.mark.slow
@pytest.mark.parametrize('engine', [
    pytest.param('estimator', marks=pytest.mark.estimator), 'ctl'])
@pytest.mark.parametrize('mistake, wrong', [
    ('forgotten --image_key', ['--label_key=image/class/label']),
    ('RGB read as grey', [*SLIM_KEYS, '--image_shape=16,16,1'])])
def test_a_failed_run_leaves_nothing_that_blocks_its_rerun(
    tmp_path, png_tfrecords, engine, mistake, wrong, capfd):
  """A mistaken flag fails before anything is written to model_dir (under
  Estimator a step-0 checkpoint of the wrong model blocked the corrected
  rerun; ctl wrote events and model.json; RGB read as grey trained on
  converted images); the rerun with the right flags trains."""
  model_dir = tmp_path / 'model'
  data = [f'--model_dir={model_dir}', f'--engine={engine}',
          f'--train_files={png_tfrecords}/train-*',
          f'--eval_files={png_tfrecords}/test-*', *_TRAIN_2_STEPS]
  code, stderr = _run(capfd, *data, *wrong)
  assert code == 1, (mistake, stderr[-3000:])
  assert stderr.strip().splitlines()[-1].startswith('error: ')
  assert not model_dir.exists(), list(model_dir.iterdir())
  # Nothing left, the rerun is a fresh run, with the same flags.
  engines.ENGINES[engine].run(TrainConfig(
      model_dir=str(model_dir), engine=engine,
      train_files=f'{png_tfrecords}/train-*',
      eval_files=f'{png_tfrecords}/test-*', image_key='image/encoded',
      label_key='image/class/label', train_steps=2,
      batch_size_per_replica=16, export='none', model='builders:mlp'))
  assert _metrics(model_dir)['global_step'] == 2


def _grey_then_rgb(directory):
  """A TFRecord file of 16x16 PNGs: 4 grey ones, then 28 RGB ones."""
  example_format = examples.ExampleFormat((16, 16, 1), 4)
  images = np.random.default_rng(0).integers(0, 256, (32, 16, 16, 3))
  path = directory / 'grey_then_rgb.tfrecord'
  with tf.io.TFRecordWriter(str(path)) as f:
    for index, image in enumerate(images):
      f.write(example_format.encode(image[..., :1] if index < 4 else image,
                                    index % 4, 'png'))
  return path


@pytest.mark.slow
@pytest.mark.parametrize('engine', [
    pytest.param('estimator', marks=pytest.mark.estimator), 'ctl'])
def test_a_run_that_fails_before_its_first_step_leaves_no_checkpoint(
    tmp_path, engine, capfd):
  """An RGB image after grey ones (the first record passed the check)
  stops the first step, naming the file and the shape found, instead of
  being turned grey; Estimator had saved step 0 already."""
  path = _grey_then_rgb(tmp_path)
  model_dir = tmp_path / 'model'
  code, stderr = _run(capfd, f'--model_dir={model_dir}', f'--engine={engine}',
                      f'--train_files={path}', f'--eval_files={path}',
                      '--image_shape=16,16,1', '--num_classes=4',
                      *_TRAIN_2_STEPS)
  assert code == 1, stderr[-3000:]
  last = stderr.strip().splitlines()[-1]
  assert ('image: image not of shape [16, 16, 1] in] '
          f'[{path}] [shape] [16 16 3]') in last, last
  assert not tf.train.latest_checkpoint(str(model_dir))
  assert not list(model_dir.glob('*ckpt*'))


@pytest.mark.slow
@pytest.mark.estimator
def test_a_cluster_chief_that_fails_before_its_first_step_leaves_none(
    tmp_path):
  """Issue 47, item 7: the step-0 clean-up applied only outside clusters;
  a chief (here of a one-task TF_CONFIG cluster) left its step 0."""
  path = _grey_then_rgb(tmp_path)
  model_dir = tmp_path / 'model'
  port, = scripts_dir.load('local_cluster').free_ports(1)
  result = _cli(f'--model_dir={model_dir}', f'--train_files={path}',
                f'--eval_files={path}', '--image_shape=16,16,1',
                '--num_classes=4', *_TRAIN_2_STEPS, env={
                    'TF_CONFIG': json.dumps({
                        'cluster': {'chief': [f'127.0.0.1:{port}']},
                        'task': {'type': 'chief', 'index': 0}})})
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'image not of shape [16, 16, 1]' in result.stderr.strip(
      ).splitlines()[-1]
  assert not list(model_dir.glob('*ckpt*'))


def _mnist(model_dir, mnist_small_dir, **overrides):
  return TrainConfig(model_dir=str(model_dir), dataset='mnist',
                     idx_dir=str(mnist_small_dir), **overrides)


@pytest.mark.slow
def test_batch_norm_moving_statistics_train_and_serve(estimator, tmp_path,
                                                      mnist_small_dir):
  """Under Estimator the Keras layers' updates must be in the train op; the
  moving statistics are what evaluation and the SavedModel use. Of any
  model with batch norm: two convolutions, Keras's momentum 0.99."""
  config = _mnist(tmp_path, mnist_small_dir, model=builders.bn_cnn,
                  model_kwargs={'momentum': 0.99}, train_steps=20,
                  batch_size_per_replica=32, export='final')
  estimator.train_and_evaluate(config)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
  moving_mean = reader.get_tensor('bn1/moving_mean')
  moving_variance = reader.get_tensor('bn1/moving_variance')
  assert np.abs(moving_mean).max() > 1e-3  # Initialized to 0.
  assert np.abs(moving_variance - 1).max() > 1e-3  # Initialized to 1.
  # The same weights in a Keras model, in inference mode (moving
  # statistics), give what the SavedModel serves.
  model = builders.bn_cnn((28, 28, 1), 10, momentum=0.99)
  for variable in model.weights:
    variable.assign(reader.get_tensor(variable.name.split(':')[0]))
  images = next(iter(sources.IdxSource('mnist', str(mnist_small_dir)).dataset(
      sources.TEST).batch(64)))[0]
  images = tf.cast(images, tf.float32) / 255.0
  export_dir = next((tmp_path / 'export' / 'final').iterdir())
  served = tf.saved_model.load(str(export_dir)).signatures['serving_default'](
      image=images)['logits']
  np.testing.assert_allclose(served, model(images, training=False), atol=1e-4)
  assert np.abs(served - model(images, training=True)).max() > 1e-2


def _bn_weights(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.endswith(('kernel', 'bias', 'gamma', 'beta', 'moving_mean',
                            'moving_variance'))}


def invariance_score(tmp_path, mnist_small_dir, sync_batch_norm, steps):
  """The largest relative difference of a variable's change over `steps`
  SGD steps between 1 and 2 replicas (same global batch), with two
  convolutions and batch norms computing in float64 (what does not depend
  on the depth; ResNet-20's own wiring of synchronized statistics is
  test_sync_batch_norm_gradients_are_the_1_replica_gradients)."""
  estimator = pytest.importorskip('estimator_trainer.estimator',
                                  exc_type=ImportError)
  changes = {}
  for name, replicas in [('default', 0), ('mirrored', 2)]:
    model_dir = tmp_path / f'{name}_{sync_batch_norm}'
    estimator.train(_mnist(
        model_dir, mnist_small_dir, model=builders.bn_cnn_float64,
        strategy=name, cpu_replicas=replicas, global_batch_size=32,
        optimizer='sgd', learning_rate=0.05, lr_decay='none',
        shuffle_buffer=0, train_steps=steps, sync_batch_norm=sync_batch_norm))
    initial = _bn_weights(str(model_dir / 'model.ckpt-0'))
    final = _bn_weights(str(model_dir / f'model.ckpt-{steps}'))
    changes[name] = {k: final[k] - initial[k] for k in final}
  for k, change in changes['default'].items():
    assert np.linalg.norm(change) > 0, f'{k} did not train'
  return max(float(np.linalg.norm(changes['mirrored'][k] - change) /
                   np.linalg.norm(change))
             for k, change in changes['default'].items())


@pytest.mark.slow
def test_sync_batch_norm_makes_2_replicas_step_like_1(tmp_path,
                                                      mnist_small_dir):
  """Synchronized statistics make 2 replicas take the 1-replica step, moving
  statistics included, within the CNN's bound (per-replica statistics make
  the steps differ by design: see the next test). In float64: in float32 the
  same batch in another order already moves ResNet-20's gradient by ~1 %
  (docs/guide/performance.md, synchronized batch norm)."""
  synced = invariance_score(tmp_path, mnist_small_dir, True, steps=1)
  print(f'bn_cnn invariance score (1 step, 1 vs 2 replicas, float64, sync '
        f'batch norm): {synced:.1e}')
  assert synced < 1e-5


def _sync_bn_step(precision, model, *modes):
  """sync_bn_step.py's score of each mode, from one process: a warm one
  (warm_process.py), the module run from the tests' directory."""
  result = warm_process.run(
      [sys.executable, '-m', 'sync_bn_step', precision, ','.join(modes),
       model], 600, cwd=str(TESTS))
  assert result.returncode == 0, result.stderr[-3000:]
  return [float(line)
          for line in result.stdout.strip().splitlines()[-len(modes):]]


@pytest.mark.slow
def test_sync_batch_norm_gradients_are_the_1_replica_gradients():
  """The TF2 engines' path (`strategy.run` in a tf.function): with
  synchronized statistics the 2-replica gradient is the 1-replica one (in
  float64, as above); with per-replica statistics it is not. On two
  convolutions: the property does not depend on the depth (ResNet-20's
  gradients, `sync_bn_step.py float64 sync,per_replica`, are the
  performance page's figures); that ResNet-20 passes --sync_batch_norm to
  each of its batch norms is checked on the built model."""
  synced, per_replica = _sync_bn_step('float64', 'builders:bn_cnn_float64',
                                      'sync', 'per_replica')
  print(f'bn_cnn_float64 gradient, 1 vs 2 replicas: {synced:.1e} '
        f'synchronized, {per_replica:.1e} per replica')
  assert synced < 1e-5
  assert per_replica > 0.1
  for sync_batch_norm in (True, False):
    model = models.build('resnet20', (28, 28, 1), 10,
                         sync_batch_norm=sync_batch_norm)
    batch_norms = [layer.synchronized for layer in model.layers
                   if isinstance(layer, tf.keras.layers.BatchNormalization)]
    assert batch_norms == [sync_batch_norm] * 19
