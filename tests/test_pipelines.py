"""Legacy-pipeline integration: TFRecord input, trainer_fn, the docs' pipeline
example."""

import importlib.util
import pathlib
import re
import types

import pytest
import tensorflow as tf

import estimator_trainer
from estimator_trainer import data
from estimator_trainer import examples
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import DataError
from conftest import MNIST_SMALL_TEST_EXAMPLES

# Estimator pipelines (and TFX's, through TFMA): skipped where tf.estimator
# is missing.
pytest.importorskip('estimator_trainer.estimator',
                    exc_type=ImportError)
tfma = pytest.importorskip('tensorflow_model_analysis')
# pylint: disable=g-import-not-at-top,g-bad-import-order
from tensorflow_model_analysis.eval_saved_model import load as tfma_load

REPO = pathlib.Path(__file__).resolve().parents[1]


def _write_tfrecords(mnist_small_dir, output_dir, num_shards):
  spec = importlib.util.spec_from_file_location(
      'write_tfrecords', REPO / 'scripts' / 'write_tfrecords.py')
  writer = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(writer)
  source = sources.IdxSource('mnist', str(mnist_small_dir))
  return writer.write(source, str(output_dir), num_shards,
                      examples.ExampleFormat((28, 28, 1), 10))


def _keys(dataset):
  """Each (image, label) example of `dataset` as bytes: image bytes, then
  the label. Read in batches: element by element, the 10,000 training
  images took seconds a pass."""
  keys = []
  for images, labels in dataset.batch(2048):
    keys += [image.tobytes() + bytes([int(label)])
             for image, label in zip(images.numpy(), labels.numpy())]
  return keys


def _tfrecord_source(tfrecords):
  """The source of the written files, as --train_files/--eval_files make it
  (shape and classes from the dataset_spec.json beside them)."""
  return sources.make_source(TrainConfig(
      model_dir='/tmp/unused', train_files=str(tfrecords / 'train-*'),
      eval_files=str(tfrecords / 'test-*')))


@pytest.fixture(scope='module')
def tfrecords(tmp_path_factory, mnist_small_dir):
  output_dir = tmp_path_factory.mktemp('tfrecords')
  _write_tfrecords(mnist_small_dir, output_dir, num_shards=4)
  return output_dir


def test_tfrecords_hold_the_same_examples_as_the_source(tfrecords,
                                                        mnist_small_dir):
  source = _tfrecord_source(tfrecords)
  assert source.spec == sources.IdxSource('mnist', str(mnist_small_dir)).spec
  assert len(source.files(sources.TRAIN)) == 4
  assert source.num_examples(sources.TEST) == MNIST_SMALL_TEST_EXAMPLES
  idx = sources.IdxSource('mnist', str(mnist_small_dir))

  assert sorted(_keys(source.dataset(sources.TEST))) == sorted(
      _keys(idx.dataset(sources.TEST)))


@pytest.fixture(scope='module')
def whole_splits(tfrecords):
  """Each split's examples, unsharded (read once for every shard count)."""
  source = _tfrecord_source(tfrecords)
  return {split: sorted(_keys(source.dataset(split)))
          for split in (sources.TRAIN, sources.TEST)}


@pytest.mark.slow
@pytest.mark.parametrize('num_shards', [2, 3, 5])
def test_tfrecord_shards_are_disjoint_and_cover_the_split(tfrecords,
                                                          whole_splits,
                                                          num_shards):
  """4 files: by file for 2 and 3 pipelines, by record for 5."""
  source = _tfrecord_source(tfrecords)
  for split in (sources.TRAIN, sources.TEST):
    keys, sizes = [], []
    for i in range(num_shards):
      shard = _keys(source.dataset(split, num_shards, i))
      keys += shard
      sizes.append(len(shard))
    assert sorted(keys) == whole_splits[split]
    assert len(keys) == {sources.TRAIN: 10000,
                         sources.TEST: MNIST_SMALL_TEST_EXAMPLES}[split]
    if split == sources.TEST:  # By record: shard sizes differ by at most 1.
      assert max(sizes) - min(sizes) <= 1


def test_missing_tfrecords_are_a_one_line_error(tmp_path):
  config = TrainConfig(model_dir=str(tmp_path), train_files='/nope/*',
                       eval_files='/nope/*')
  with pytest.raises(DataError, match="no files match '/nope/\\*'"):
    data.make_input_fn(config, 64)


def _tfma_metrics(trainer_spec, export_dir_base, files):
  """What TFX's Trainer does after training: exports the eval graph for
  TFMA, which computes the model's own metrics from the serialized
  examples (with their labels) of `files`."""
  eval_model_dir = tfma.export.export_eval_savedmodel(
      estimator=trainer_spec['estimator'],
      export_dir_base=str(export_dir_base),
      eval_input_receiver_fn=trainer_spec['eval_input_receiver_fn'])
  eval_model = tfma_load.EvalSavedModel(eval_model_dir.decode())
  eval_model.metrics_reset_update_get_list([
      record.numpy() for record in tf.data.TFRecordDataset(
          sorted(map(str, files)))])
  return eval_model.get_metric_values()


@pytest.mark.slow
def test_trainer_fn_with_a_stand_in_tfx_args_object(tfrecords, tmp_path):
  args = types.SimpleNamespace(
      train_files=[str(tfrecords / 'train-*')],
      eval_files=[str(tfrecords / 'test-*')],
      serving_model_dir=str(tmp_path / 'serving'),
      train_steps=60, eval_steps=None)
  spec = estimator_trainer.trainer_fn(args, schema=None)
  assert set(spec) == {'estimator', 'train_spec', 'eval_spec',
                       'eval_input_receiver_fn'}
  metrics, exports = tf.estimator.train_and_evaluate(
      spec['estimator'], spec['train_spec'], spec['eval_spec'])
  assert metrics['global_step'] == 60 and metrics['accuracy'] > 0.5
  assert len(exports) == 1
  assert list((tmp_path / 'serving' / 'export' / 'final').glob(
      '*/saved_model.pb'))

  # What TFX's Trainer does next: export the eval graph for TFMA, which
  # computes the model's own metrics from serialized examples and labels.
  tfma_metrics = _tfma_metrics(spec, tmp_path / 'eval',
                               tfrecords.glob('test-*'))
  assert tfma_metrics['num_examples'] == MNIST_SMALL_TEST_EXAMPLES
  assert tfma_metrics['accuracy'] == pytest.approx(metrics['accuracy'],
                                                   abs=1e-6)


PIPELINE_PAGE = REPO / 'docs' / 'guide' / 'python-api.md'


@pytest.mark.slow
def test_docs_pipeline_example_runs(tmp_path, fashion_mnist_dir):
  """Runs the legacy-pipeline example of the Python API page exactly, in a
  temp model_dir."""
  page = PIPELINE_PAGE.read_text()
  code = re.search(r'<!-- pipeline-example -->\s*```python\n(.*?)```',
                   page, re.S).group(1)
  code, count = re.subn(r"MODEL_DIR = '.*'", f"MODEL_DIR = '{tmp_path}'",
                        code)
  assert count == 1
  namespace = {}
  exec(compile(code, str(PIPELINE_PAGE), 'exec'), namespace)  # pylint: disable=exec-used
  assert namespace['metrics']['global_step'] == 200
  assert namespace['metrics']['accuracy'] > 0.6


@pytest.mark.slow
def test_trainer_fn_on_structured_data_through_custom_config(tmp_path):
  """TFX's Trainer on tf.Examples of a census-like set: trainer_fn takes the
  feature spec, head and model from the Trainer's custom_config, and TFMA's
  eval graph computes the model's own metrics from serialized examples."""
  from estimator_trainer.benchmark import census  # pylint: disable=g-import-not-at-top
  data_dir = tmp_path / 'census'
  census.write(str(data_dir), rows=2000, num_shards=2, weights=True)
  args = types.SimpleNamespace(
      train_files=[census.files(str(data_dir), 'train')],
      eval_files=[census.files(str(data_dir), 'test')],
      serving_model_dir=str(tmp_path / 'serving'), train_steps=40,
      eval_steps=None,
      custom_config={'feature_spec': str(data_dir / 'feature_spec.json'),
                     'model': 'wide_deep', 'optimizer': 'adagrad',
                     'learning_rate': 0.05, 'global_batch_size': 64})
  spec = estimator_trainer.trainer_fn(args, schema=None)
  metrics, _ = tf.estimator.train_and_evaluate(
      spec['estimator'], spec['train_spec'], spec['eval_spec'])
  assert metrics['global_step'] == 40 and 'auc' in metrics
  tfma_metrics = _tfma_metrics(spec, tmp_path / 'eval',
                               data_dir.glob('test-*.tfrecord'))
  # The weight column weighs TFMA's metrics as the trainer's.
  for name in ('num_examples', 'accuracy', 'auc', 'average_loss'):
    assert tfma_metrics[name] == pytest.approx(metrics[name], rel=1e-4), name
