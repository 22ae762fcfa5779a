"""The CNN's weights in a model_dir, whichever engine wrote it: a helper of
the tests that compare engines."""

import tensorflow as tf

from estimator_trainer import models
from estimator_trainer import weights


def cnn_weights(model_dir):
  """name -> value of the CNN's weights in model_dir's latest checkpoint, an
  Estimator (by name) or a TF2 engine's (by object)."""
  names = models.check('cnn', (28, 28, 1), 10)
  values = weights.read_weights(tf.train.latest_checkpoint(str(model_dir)),
                                names, lambda: models.cnn((28, 28, 1), 10))
  return dict(zip(names, values))
