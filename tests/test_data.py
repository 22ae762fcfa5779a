import collections
import gc
import gzip
import hashlib
import weakref

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from estimator_trainer import data
from estimator_trainer import examples
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.data import ModeKeys
from estimator_trainer.errors import DataError, UsageError
from conftest import MNIST_SMALL_TEST_EXAMPLES
from conftest import write_idx

TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT


def _key(image):
  return hashlib.sha1(np.asarray(image).tobytes()).hexdigest()


def _split_keys(source, split):
  """Keys of a split's examples as input_fn yields them (normalized)."""
  return [_key(tf.cast(x, tf.float32) / 255.0)
          for x, _ in source.dataset(split)]


def _context(pipelines, pipeline_id, replicas):
  return tf.distribute.InputContext(num_input_pipelines=pipelines,
                                    input_pipeline_id=pipeline_id,
                                    num_replicas_in_sync=replicas)


@pytest.fixture(scope='module')
def mock_source():
  with tfds.testing.mock_data(num_examples=70):
    source = sources.TfdsSource('fashion_mnist')
    source.num_examples(sources.TRAIN)
    source.num_examples(sources.TEST)
    yield source


# --- Sources ---------------------------------------------------------------


def _idx_payload(path, header_bytes):
  """An IDX file's bytes after its header, read without the package."""
  with gzip.open(path) as f:
    return np.frombuffer(f.read()[header_bytes:], np.uint8)


def test_idx_source_reads_real_fashion_mnist_test_split(fashion_mnist_dir):
  source = sources.IdxSource('fashion_mnist', str(fashion_mnist_dir))
  assert source.num_examples(sources.TEST) == 10000
  ds = source.dataset(sources.TEST)
  assert ds.element_spec == (
      tf.TensorSpec((28, 28, 1), tf.uint8), tf.TensorSpec((), tf.int64))
  labels = np.concatenate([y.numpy() for _, y in ds.batch(2000)])
  # The labels are the file's bytes after the 8-byte header, in order; the
  # published test split has 1,000 examples of each of the 10 classes.
  np.testing.assert_array_equal(
      labels, _idx_payload(fashion_mnist_dir / 't10k-labels-idx1-ubyte.gz', 8))
  assert np.bincount(labels).tolist() == [1000] * 10
  # The images are the file's bytes after the 16-byte header, in order.
  raw = _idx_payload(fashion_mnist_dir / 't10k-images-idx3-ubyte.gz',
                     16).reshape(-1, 28, 28, 1)
  first = next(iter(ds.batch(3)))[0].numpy()
  np.testing.assert_array_equal(first, raw[:3])


def test_tfds_source_has_the_same_element_spec_as_idx(mock_source,
                                                      mnist_small_dir):
  idx = sources.IdxSource('mnist', str(mnist_small_dir))
  assert (mock_source.dataset(sources.TRAIN).element_spec ==
          idx.dataset(sources.TRAIN).element_spec)
  assert mock_source.num_examples(sources.TEST) == 70


def test_make_source_uses_idx_dir_and_tfds_when_asked(mnist_small_dir):
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(mnist_small_dir))
  assert isinstance(sources.make_source(config), sources.IdxSource)
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(mnist_small_dir), data_source='tfds')
  assert isinstance(sources.make_source(config), sources.TfdsSource)


def test_tfds_failure_is_one_line_data_error(tmp_path):
  # mnist is not prepared in this empty data_dir and there is no network.
  source = sources.TfdsSource('mnist', data_dir=str(tmp_path))
  source._builder.download_and_prepare = _raise_connection_error
  with pytest.raises(DataError, match=r'TFDS could not prepare mnist .*'
                     r'ConnectionError.*--idx_dir') as e:
    source.num_examples(sources.TRAIN)
  assert '\n' not in str(e.value)


def _raise_connection_error(*args, **kwargs):
  raise ConnectionError('Failed to resolve host\nmore detail')


# --- IDX validation --------------------------------------------------------


def _write_split(directory, images=None, labels=None, image_magic=2051,
                 label_magic=2049, truncate_images=0):
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (5, 28, 28), np.uint8) if images is None \
      else images
  labels = np.arange(5) if labels is None else labels
  names = sources.IDX_FILES[sources.TEST]
  write_idx(directory / names[0], image_magic, images.shape[1:], images,
             truncate_images)
  write_idx(directory / names[1], label_magic, (), labels)
  return directory


@pytest.mark.parametrize('kwargs, message', [
    (dict(image_magic=2049), r't10k-images-idx3-ubyte.gz: magic number 0x801'),
    (dict(label_magic=2051), r't10k-labels-idx1-ubyte.gz: magic number 0x803'),
    (dict(labels=np.array([0, 1, 2, 3, 10])),
     r't10k-labels-idx1-ubyte.gz: label 10 out of range 0..9'),
    (dict(labels=np.arange(4)), r'5 images but .* has 4 labels'),
    (dict(truncate_images=100),
     r't10k-images-idx3-ubyte.gz: not a complete gzip file'),
])
def test_bad_idx_files_are_one_line_errors_naming_the_file(tmp_path, kwargs,
                                                           message):
  source = sources.IdxSource('mnist', str(_write_split(tmp_path, **kwargs)))
  with pytest.raises(DataError, match=message) as e:
    source.num_examples(sources.TEST)
  assert '\n' not in str(e.value)


def test_idx_images_of_any_size_the_same_in_both_splits(tmp_path):
  _write_split(tmp_path, images=np.zeros((5, 32, 30), np.uint8))
  source = sources.IdxSource('mnist', str(tmp_path))
  assert source.spec.image_shape == (32, 30, 1)
  assert source.num_examples(sources.TEST) == 5
  image, _ = next(iter(source.dataset(sources.TEST)))
  assert image.shape == (32, 30, 1)
  names = sources.IDX_FILES[sources.TRAIN]
  write_idx(tmp_path / names[0], 2051, (27, 28),
             np.zeros((5, 27, 28), np.uint8))
  write_idx(tmp_path / names[1], 2049, (), np.arange(5))
  with pytest.raises(DataError, match=r'train-images-idx3-ubyte.gz: images '
                     r'of shape \[27, 28\], but the test images are '
                     r'\[32, 30\]'):
    source.num_examples(sources.TRAIN)


def test_idx_length_must_match_header(tmp_path):
  names = sources.IDX_FILES[sources.TEST]
  _write_split(tmp_path)
  header = np.array([2051, 6, 28, 28], '>u4').tobytes()  # Says 6, holds 5.
  payload = np.zeros((5, 28, 28), np.uint8).tobytes()
  (tmp_path / names[0]).write_bytes(gzip.compress(header + payload))
  with pytest.raises(DataError, match='header says 6 records but the file '
                     'holds 5'):
    sources.IdxSource('mnist', str(tmp_path)).num_examples(sources.TEST)


def test_missing_idx_file_is_named(tmp_path):
  with pytest.raises(DataError, match='t10k-images-idx3-ubyte.gz: no such'):
    sources.IdxSource('mnist', str(tmp_path)).num_examples(sources.TEST)


def test_the_spec_reads_the_header_and_the_split_the_whole_file(tmp_path):
  """The spec (every run asks for it) inflates the test images' header, not
  all of them; the split's count still reads and checks every byte."""
  source = sources.IdxSource(
      'mnist', str(_write_split(tmp_path, truncate_images=100)))
  assert source.spec.image_shape == (28, 28, 1)
  with pytest.raises(DataError, match='not a complete gzip file'):
    source.num_examples(sources.TEST)


def test_make_input_fn_validates_before_building_any_graph(tmp_path):
  _write_split(tmp_path, label_magic=7)
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(tmp_path))
  with pytest.raises(DataError, match='magic number 0x7'):
    data.make_input_fn(config, 64)


# --- input_fn ---------------------------------------------------------------


def _train_epoch_keys(input_fn, context, shard_size):
  """Keys of the first `shard_size` examples a TRAIN pipeline yields."""
  keys, labels = [], []
  for features, y in input_fn(TRAIN, context):
    keys += [_key(x) for x in features['image'].numpy()]
    labels += y.numpy().tolist()
    if len(keys) >= shard_size:
      return keys[:shard_size], labels[:shard_size]
  raise AssertionError('TRAIN input ended')


@pytest.mark.parametrize('num_pipelines', [1, 2, 3])
def test_train_shards_are_disjoint_and_cover_the_split(mock_source,
                                                       num_pipelines):
  config = TrainConfig(model_dir='/tmp/x', shuffle_buffer=0)
  input_fn = data.make_input_fn(config, 6 * num_pipelines, mock_source)
  everything = _split_keys(mock_source, sources.TRAIN)
  assert len(set(everything)) == 70  # Keys identify examples.
  shards = []
  for i in range(num_pipelines):
    shard_size = len(range(i, 70, num_pipelines))
    keys, _ = _train_epoch_keys(
        input_fn, _context(num_pipelines, i, num_pipelines), shard_size)
    assert len(set(keys)) == shard_size
    shards.append(set(keys))
  assert sum(len(s) for s in shards) == 70
  assert set.union(*shards) == set(everything)


def test_train_shards_real_images(mnist_small_dir):
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(mnist_small_dir), shuffle_buffer=1000)
  input_fn = data.make_input_fn(config, 500)
  shards = [_train_epoch_keys(input_fn, _context(2, i, 2), 5000)
            for i in range(2)]
  keys = [set(k) for k, _ in shards]
  assert not keys[0] & keys[1]
  labels = shards[0][1] + shards[1][1]
  # Together the two shards are the train split: its labels, in some order.
  assert sorted(labels) == sorted(_idx_payload(
      mnist_small_dir / 'train-labels-idx1-ubyte.gz', 8).tolist())


def _tfrecord_source(directory, file_sizes):
  """TFRecord files of `file_sizes` records, 4x4 images whose first pixel
  numbers the example: the source reads them as --train_files does."""
  fmt = examples.ExampleFormat((4, 4, 1), 10)
  number = 0
  for i, size in enumerate(file_sizes):
    with tf.io.TFRecordWriter(str(directory / f'train-{i}.tfrecord')) as w:
      for _ in range(size):
        image = np.zeros((4, 4, 1), np.uint8)
        image[0, 0, 0] = number
        w.write(fmt.encode(image, number % 10))
        number += 1
  pattern = str(directory / 'train-*')
  return sources.TFRecordSource(
      {sources.TRAIN: pattern, sources.TEST: pattern}, fmt,
      sources.DatasetSpec('numbered', (4, 4, 1), 10))


def test_a_source_goes_with_what_it_read(mnist_small_dir, tmp_path):
  """A source's counts and file sizes are kept on it, not in a cache of
  its class: a pipeline that makes a source per run does not hold them all
  (functools.lru_cache on a method held every source for the process's
  life)."""
  idx = sources.make_source(TrainConfig(
      model_dir='/tmp/x', dataset='mnist', idx_dir=str(mnist_small_dir)))
  tfrecord = _tfrecord_source(tmp_path, [3, 2])
  assert idx.num_examples(sources.TEST) == MNIST_SMALL_TEST_EXAMPLES
  sizes = tfrecord.file_sizes(sources.TRAIN)
  assert list(sizes) == [3, 2]
  # Asked again: what the source kept, not a second read of the files.
  assert tfrecord.file_sizes(sources.TRAIN) is sizes
  kept = [weakref.ref(idx), weakref.ref(tfrecord)]
  del idx, tfrecord
  gc.collect()
  assert [ref() for ref in kept] == [None, None]


def _numbers(ds):
  return [int(x[0, 0, 0]) for x, _ in ds]


@pytest.mark.parametrize('file_sizes, num_pipelines', [
    ((70, 50, 30), 2), ((30, 70, 50), 2), ((10, 10, 10), 2),
    ((50, 40), 3)])
def test_tfrecord_train_shards_are_even_whatever_the_file_sizes(
    tmp_path, file_sizes, num_pipelines):
  """Files the pipelines cannot share evenly: by record, each pipeline its
  1/num_pipelines, every example once per epoch, as many steps apart."""
  source = _tfrecord_source(tmp_path, file_sizes)
  total = sum(file_sizes)
  # One epoch of training steps, each pipeline its per-replica batch: no
  # example twice (a short shard would start over, 10,016 of 60,000 seen
  # twice, a long one never reach its end).
  config = TrainConfig(model_dir='/tmp/x', shuffle_buffer=0)
  batch = 5
  input_fn = data.make_input_fn(config, batch * num_pipelines, source)
  epoch = []
  for i in range(num_pipelines):
    for features, _ in input_fn(
        TRAIN, _context(num_pipelines, i, num_pipelines)).take(
            total // (batch * num_pipelines)):
      epoch += [round(x * 255) for x in features['image'][:, 0, 0, 0].numpy()]
  assert len(set(epoch)) == len(epoch) == (
      total // (batch * num_pipelines) * batch * num_pipelines)
  shards = [_numbers(source.dataset(sources.TRAIN, num_pipelines, i))
            for i in range(num_pipelines)]
  assert sorted(sum(shards, [])) == list(range(total))
  assert max(map(len, shards)) - min(map(len, shards)) <= 1


@pytest.mark.parametrize('file_sizes, num_pipelines', [
    ((25, 25, 25, 25), 2), ((25, 25, 25, 25), 4), ((30, 40, 20, 10), 2),
    ((50, 50, 49), 3)])
def test_tfrecord_train_shards_are_whole_files_when_they_are_even(
    tmp_path, file_sizes, num_pipelines):
  """Pipeline i reads only files i, i + num_pipelines, ... when those give
  every pipeline the same number of records, within one."""
  source = _tfrecord_source(tmp_path, file_sizes)
  starts = np.cumsum((0,) + file_sizes)
  for i in range(num_pipelines):
    own = [n for f in range(i, len(file_sizes), num_pipelines)
           for n in range(starts[f], starts[f + 1])]
    assert _numbers(source.dataset(sources.TRAIN, num_pipelines, i)) == own


def test_tfrecord_shards_are_decided_inside_estimators_graph(tmp_path):
  """Estimator calls input_fn in a graph of its own: the records are
  counted there too."""
  source = _tfrecord_source(tmp_path, (7, 5, 3))
  with tf.Graph().as_default():
    element = tf.compat.v1.data.make_one_shot_iterator(
        source.dataset(sources.TRAIN, 2, 1)).get_next()
    with tf.compat.v1.Session() as session:
      numbers = [int(session.run(element)[0][0, 0, 0]) for _ in range(7)]
  assert numbers == list(range(1, 15, 2))


def test_train_batches_are_per_replica_and_normalized(mock_source):
  config = TrainConfig(model_dir='/tmp/x')
  input_fn = data.make_input_fn(config, 64, mock_source)
  features, labels = next(iter(input_fn(TRAIN, _context(2, 1, 4))))
  assert features['image'].shape == (16, 28, 28, 1)
  assert features['image'].dtype == tf.float32
  assert labels.dtype == tf.int64
  assert 0.0 <= float(tf.reduce_min(features['image']))
  assert float(tf.reduce_max(features['image'])) <= 1.0
  # Without a strategy, Estimator passes no context: one global batch.
  features, _ = next(iter(input_fn(TRAIN)))
  assert features['image'].shape[0] == 64


def test_shuffle_is_seeded_and_zero_turns_it_off(mock_source):
  def first_labels(**kwargs):
    config = TrainConfig(model_dir='/tmp/x', **kwargs)
    ds = data.make_input_fn(config, 70, mock_source)(TRAIN)
    return next(iter(ds))[1].numpy().tolist()

  in_order = [int(y) for _, y in mock_source.dataset(sources.TRAIN)]
  assert first_labels(shuffle_buffer=0) == in_order
  assert first_labels(seed=1) == first_labels(seed=1)
  assert first_labels(seed=1) != in_order


@pytest.mark.parametrize('graph_seed', [1, None])
def test_a_seed_shuffles_in_one_order_in_a_graph_and_eagerly(mock_source,
                                                             graph_seed):
  """Estimator builds the dataset in its graph, whose seed is RunConfig's
  tf_random_seed (--seed, 1 here); the TF2 engines eagerly, with no global
  seed. tf.data's shuffle took its seed pair from both: the engines trained
  on other orders of one table (issue 72, item 4). Neither global seed
  takes part now, and the process's is left as it was."""
  input_fn = data.make_input_fn(TrainConfig(model_dir='/tmp/x', seed=1), 35,
                                mock_source)
  before = tf.compat.v1.get_seed(1)
  eager = [labels.numpy().tolist()
           for _, labels in input_fn(TRAIN).take(4)]  # Past an epoch (70).
  assert tf.compat.v1.get_seed(1) == before
  with tf.Graph().as_default() as graph:
    graph.seed = graph_seed
    labels = tf.compat.v1.data.make_one_shot_iterator(
        input_fn(TRAIN)).get_next()[1]
    with tf.compat.v1.Session() as session:
      assert [session.run(labels).tolist() for _ in range(4)] == eager


@pytest.mark.parametrize('pipelines, replicas, global_batch', [
    (1, 1, 64), (1, 2, 64), (2, 2, 64), (2, 4, 32), (3, 3, 9)])
def test_eval_sees_every_test_example_exactly_once(mnist_small_dir, pipelines,
                                                   replicas, global_batch):
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(mnist_small_dir))
  input_fn = data.make_input_fn(config, global_batch)
  counts, steps = collections.Counter(), set()
  for i in range(pipelines):
    batches = list(input_fn(EVAL, _context(pipelines, i, replicas)))
    # Same step count in every pipeline, whole steps for the local replicas.
    assert len(batches) % (replicas // pipelines) == 0
    steps.add(len(batches) // (replicas // pipelines))
    for features, _ in batches:
      for x, w in zip(features['image'].numpy(), features['weight'].numpy()):
        if w:
          counts[_key(x)] += 1
  assert len(steps) == 1
  reference = collections.Counter(_split_keys(
      sources.IdxSource('mnist', str(mnist_small_dir)), sources.TEST))
  assert counts == reference
  assert sum(counts.values()) == MNIST_SMALL_TEST_EXAMPLES


def test_eval_without_context_is_the_test_split_in_order(mock_source):
  config = TrainConfig(model_dir='/tmp/x')
  batches = list(data.make_input_fn(config, 32, mock_source)(EVAL))
  labels = np.concatenate([y for _, y in batches])
  weights = np.concatenate([f['weight'] for f, _ in batches])
  padding = np.concatenate([f['padding'] for f, _ in batches])
  in_order = [int(y) for _, y in mock_source.dataset(sources.TEST)]
  assert weights.tolist() == [1.0] * 70 + [0.0] * 26
  assert padding.tolist() == [False] * 70 + [True] * 26
  assert labels[:70].tolist() == in_order


def test_predict_yields_the_first_test_images(mock_source):
  config = TrainConfig(model_dir='/tmp/x', num_predictions=5)
  batches = list(data.make_input_fn(config, 64, mock_source)(PREDICT))
  assert len(batches) == 1 and batches[0]['image'].shape == (5, 28, 28, 1)


def test_crop_flip_keeps_the_shape_and_repeats_per_seed_and_index():
  image = tf.reshape(tf.range(8 * 8 * 3, dtype=tf.int32) % 256,
                     [8, 8, 3])
  image = tf.cast(image, tf.uint8)
  augment = data.crop_flip(seed=7)
  crops = [augment(tf.constant(i, tf.int64), (image, 3))[0].numpy()
           for i in range(8)]
  assert all(c.shape == (8, 8, 3) for c in crops)
  again = augment(tf.constant(5, tf.int64), (image, 3))[0].numpy()
  np.testing.assert_array_equal(crops[5], again)
  assert len({c.tobytes() for c in crops}) > 1  # Not all the same window.
  other_seed = [data.crop_flip(seed=8)(tf.constant(i, tf.int64),
                                       (image, 3))[0].numpy()
                for i in range(8)]
  assert any(not np.array_equal(a, b) for a, b in zip(crops, other_seed))


def test_augmentation_is_for_training_only(mnist_small_dir):
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(mnist_small_dir), augment='crop_flip',
                       shuffle_buffer=0)
  plain = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                      idx_dir=str(mnist_small_dir), shuffle_buffer=0)
  modes = ModeKeys
  for mode in (modes.EVAL, modes.PREDICT):
    augmented = data.make_input_fn(config, 16)(mode)
    reference = data.make_input_fn(plain, 16)(mode)
    first = next(iter(augmented))
    expected = next(iter(reference))
    first = first[0] if isinstance(first, tuple) else first
    expected = expected[0] if isinstance(expected, tuple) else expected
    np.testing.assert_array_equal(first['image'], expected['image'])
  train_augmented = next(iter(data.make_input_fn(config, 16)(modes.TRAIN)))
  train_plain = next(iter(data.make_input_fn(plain, 16)(modes.TRAIN)))
  assert not np.array_equal(train_augmented[0]['image'],
                            train_plain[0]['image'])


def test_tfds_images_of_varying_size_need_and_get_image_size():
  with tfds.testing.mock_data(num_examples=6):
    with pytest.raises(UsageError, match='images vary in size; give '
                       '--image_size=HEIGHT,WIDTH'):
      sources.TfdsSource('oxford_flowers102').spec  # pylint: disable=expression-not-assigned
    source = sources.TfdsSource('oxford_flowers102', image_size=(24, 20))
    assert source.spec.image_shape == (24, 20, 3)
    assert source.spec.num_classes == 102
    shapes = {tuple(x.shape) for x, _ in source.dataset(sources.TRAIN)}
    assert shapes == {(24, 20, 3)}


def test_a_tfds_dataset_without_image_and_label_lists_its_features():
  with tfds.testing.mock_data(num_examples=2):
    with pytest.raises(UsageError, match=r'--dataset imdb_reviews: needs an '
                       r'`image` and a ClassLabel `label` feature; it has '
                       r'label, text'):
      sources.TfdsSource('imdb_reviews').spec  # pylint: disable=expression-not-assigned


@pytest.mark.estimator
def test_mode_keys_are_estimators():
  assert (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) == (
      tf.estimator.ModeKeys.TRAIN, tf.estimator.ModeKeys.EVAL,
      tf.estimator.ModeKeys.PREDICT)


def test_a_record_that_is_no_tf_example_is_a_data_error():
  """A TFRecord of other protos (or of text) fails on its first record
  with the file named, not with protobuf's bare DecodeError."""
  example_format = examples.ExampleFormat((2, 2, 1), 3, 'image', 'label')
  with pytest.raises(DataError, match=r'^the first record of x.tfrecord is '
                     r'not a tf.Example \(.*\): the files must be TFRecords '
                     r'of serialized tf.train.Example$'):
    example_format.check_record(b'\xff\xff\xff', 'the first record of x.tfrecord')


@pytest.mark.parametrize('flags, names', [
    ({'image_shape': (8, 8, 1)}, ('a', 'b', 'c')),
    ({'num_classes': 3}, ('a', 'b', 'c')),
    ({'num_classes': 4}, ('0', '1', '2', '3')),
])
def test_tfrecord_flags_keep_the_spec_files_class_names(tmp_path, flags,
                                                        names):
  """--image_shape (or an unchanged --num_classes) beside a
  dataset_spec.json keeps its class names; another class count cannot."""
  (tmp_path / sources.SPEC_FILE).write_text(sources.DatasetSpec(
      'letters', (4, 4, 1), 3, ('a', 'b', 'c')).to_json())
  config = TrainConfig(model_dir=str(tmp_path / 'm'),
                       train_files=str(tmp_path / 'x'),
                       eval_files=str(tmp_path / 'x'), **flags)
  spec = sources.tfrecord_spec(config, [str(tmp_path / 'train.tfrecord')])
  assert spec.class_names == names
  assert spec.image_shape == flags.get('image_shape', (4, 4, 1))
