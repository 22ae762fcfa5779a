"""The CNN's weights in a model_dir, whichever engine wrote it: a helper of
the tests that compare engines."""

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer import sources
from estimator_trainer import weights


def cnn_weights(model_dir):
  """name -> value of the CNN's weights in model_dir's latest checkpoint, an
  Estimator (by name) or a TF2 engine's (by object)."""
  names = models.check('cnn', (28, 28, 1), 10)
  values = weights.read_weights(tf.train.latest_checkpoint(str(model_dir)),
                                names, lambda: models.cnn((28, 28, 1), 10))
  return dict(zip(names, values))


def tf2_weights(path):
  """The CNN's weights in TF2 checkpoint `path`, in model order."""
  model = models.cnn()
  tf.train.Checkpoint(model=model).restore(str(path)).expect_partial()
  return [w.numpy() for w in model.weights]


def tf2_averages(path):
  """--ema_decay's averages of the CNN's weights in TF2 checkpoint `path`."""
  reader = tf.train.load_checkpoint(str(path))
  return [reader.get_tensor(f'ema/averages/{i}/.ATTRIBUTES/VARIABLE_VALUE')
          for i in range(len(models.cnn().weights))]


def test_logits(values, idx_dir, count=100_000):
  """The logits and labels of the CNN with weights `values` on the first
  `count` examples of the test split of `idx_dir` (an mnist IDX
  directory)."""
  model = models.cnn()
  model.set_weights(values)
  images, labels = next(iter(sources.IdxSource('mnist', str(idx_dir)).dataset(
      sources.TEST).batch(count)))
  return model(tf.cast(images, tf.float32) / 255.0).numpy(), labels


def mean_test_loss(values, idx_dir):
  """The mean cross-entropy over the test split of `idx_dir` of the CNN
  with weights `values`."""
  logits, labels = test_logits(values, idx_dir)
  return float(tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
      labels, logits, from_logits=True)))
