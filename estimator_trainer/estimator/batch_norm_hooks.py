"""The estimator engine's batch-norm statistics (batch_norm.py): model_fn
notes its training model; on the chief, a CheckpointSaverListener
recomputes them (precise BN) before every checkpoint save, or else warns
when they are stale.

Before the save, in the training session: the checkpoint then holds the
statistics of its own weights (with --ema_decay, of the averages, which
evaluation and export use), so every evaluation and export of it (in a
graph of their own, from the checkpoint, possibly in another process) uses
them. Training goes on from them; it never normalizes with the moving
statistics.
"""

import logging
import weakref

import tensorflow as tf

from estimator_trainer import batch_norm
from estimator_trainer.errors import UsageError

_logger = logging.getLogger(__name__)

# Each training graph's model (with MirroredStrategy, model_fn builds one
# per replica on the same variables: the first).
_MODELS = weakref.WeakKeyDictionary()
# Each training graph's --ema_decay average (moving_average.Average).
_AVERAGES = weakref.WeakKeyDictionary()


def note_training_model(model):
  """Called by model_fn in TRAIN mode."""
  _MODELS.setdefault(tf.compat.v1.get_default_graph(), model)


def note_average(average):
  """Called by model_fn in TRAIN mode with --ema_decay's Average (or
  None)."""
  if average:
    _AVERAGES.setdefault(tf.compat.v1.get_default_graph(), average)


def _training_model():
  return _MODELS[tf.compat.v1.get_default_graph()]


class StatisticsListener(tf.compat.v1.train.CheckpointSaverListener):
  """Before each checkpoint save, with `recompute` (--bn_recompute_batches):
  writes the population statistics of the first `num_batches` batches of
  `make_dataset()` (the model's inputs of global batches of training data,
  in their seeded order) into the moving statistics. Without: the warnings
  when the moving statistics are stale (at the start, and measured at
  `final_step`)."""

  def __init__(self, make_dataset, num_batches, recompute, final_step):
    self._make_dataset = make_dataset
    self._num_batches = num_batches
    self._recompute = recompute
    self._final_step = final_step
    self._layers = []

  def begin(self):
    model = _training_model()
    if self._recompute:
      batch_norm.check(model)
    elif batch_norm.warn_if_stale(model, self._final_step):
      return  # Said already: nothing to measure at the end.
    self._layers = batch_norm.layers(model)
    if not self._layers:
      return
    average = (_AVERAGES.get(tf.compat.v1.get_default_graph())
               if self._recompute else None)
    # With --ema_decay, the recompute is of the averages (what evaluation
    # and export use): they stand in for the weights meanwhile.
    pairs = average.pairs() if average else []
    raw = [tf.identity(weight) for _, weight in pairs]
    with tf.control_dependencies(raw):
      swapped = [weight.assign(value) for value, weight in pairs]
    try:
      with tf.control_dependencies(swapped):
        self._statistics = tf.function(
            lambda: batch_norm.population_statistics(
                model, self._layers, self._make_dataset(),
                self._num_batches))()
    except UsageError:
      if self._recompute:
        raise
      self._layers = []  # A model it cannot measure: no check.
    if self._recompute:
      assigned = batch_norm.assign(self._layers, self._statistics)
      with tf.control_dependencies(assigned):
        self._assign = tf.group(*assigned, *(
            weight.assign(value) for (_, weight), value in zip(pairs, raw)))
    else:  # Read ops now: the session's graph is finalized at the save.
      self._moving = [(tf.identity(layer.moving_mean),
                       tf.identity(layer.moving_variance))
                      for layer in self._layers]

  def before_save(self, session, global_step_value):
    if not self._layers:
      return
    if self._recompute:
      session.run(self._assign)
      _logger.info('Recomputed the moving statistics of %d batch-norm '
                   'layers over %d training batches for step %d',
                   len(self._layers), self._num_batches, global_step_value)
    elif global_step_value == self._final_step:
      moving, statistics = session.run((self._moving, self._statistics))
      batch_norm.warn_if_far(batch_norm.staleness(
          self._layers, moving, statistics), global_step_value)
