"""The estimator engine's batch-norm statistics (batch_norm.py): model_fn
notes its training model; on the chief, a hook warns when the momentum
leaves the moving statistics stale, and a CheckpointSaverListener
recomputes them (precise BN) before every checkpoint save.

Before the save, in the training session: the checkpoint then holds the
statistics of its own weights, so every evaluation and export of it (in a
graph of their own, from the checkpoint, possibly in another process) uses
them. Training goes on from them; it never normalizes with the moving
statistics.
"""

import logging
import weakref

import tensorflow as tf

from estimator_trainer import batch_norm

_logger = logging.getLogger(__name__)

# Each training graph's model (with MirroredStrategy, model_fn builds one
# per replica on the same variables: the first).
_MODELS = weakref.WeakKeyDictionary()


def note_training_model(model):
  """Called by model_fn in TRAIN mode."""
  _MODELS.setdefault(tf.compat.v1.get_default_graph(), model)


def _training_model():
  return _MODELS[tf.compat.v1.get_default_graph()]


class StaleStatisticsHook(tf.compat.v1.train.SessionRunHook):
  """Warns when the momentum leaves the moving statistics stale after
  `train_steps` steps (without --bn_recompute_batches)."""

  def __init__(self, train_steps):
    self._train_steps = train_steps

  def begin(self):
    batch_norm.warn_if_stale(_training_model(), self._train_steps)


class RecomputeListener(tf.compat.v1.train.CheckpointSaverListener):
  """Writes the population statistics of the first `num_batches` batches
  of `make_dataset()` (global batches of training data, in their seeded
  order) into the moving statistics before each checkpoint save."""

  def __init__(self, make_dataset, num_batches):
    self._make_dataset = make_dataset
    self._num_batches = num_batches

  def begin(self):
    model = _training_model()
    batch_norm.check(model)
    self._layers = batch_norm.layers(model)
    statistics = tf.function(lambda: batch_norm.population_statistics(
        model, self._layers, self._make_dataset(), self._num_batches))()
    self._recompute = tf.group(batch_norm.assign(self._layers, statistics))

  def before_save(self, session, global_step_value):
    session.run(self._recompute)
    _logger.info('Recomputed the moving statistics of %d batch-norm layers '
                 'over %d training batches for step %d', len(self._layers),
                 self._num_batches, global_step_value)
