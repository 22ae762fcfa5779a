"""Keras layer names that come from the model's builder alone: Estimator
checkpoints are keyed by them, so they must not depend on what the process
built before, the strategy or the replica count (models.build)."""

import contextlib
import sys
import threading
import weakref

import tensorflow as tf


class NameCounters(weakref.WeakKeyDictionary):
  """Keras's per-graph counters of layer names (`backend.
  PER_GRAPH_OBJECT_NAME_UIDS`, which `get_uid` and `unique_object_name` both
  read), with counters of its own for a thread that is building a model.

  Keras names an unnamed layer `conv2d_<n>` from a counter shared by the
  graph (in eager mode, by the process). Estimator checkpoints are keyed by
  those names, so they must not depend on what was built before: another
  model in the process, or, under MirroredStrategy, the other replicas,
  whose threads build their copies in the same graph, interleaved at every
  synchronized batch norm.
  """

  def __init__(self, counters):
    super().__init__(counters)
    self._building = threading.local()

  def _own(self):
    return getattr(self._building, 'counters', None)

  def __contains__(self, graph):
    own = self._own()
    return graph in own if own is not None else super().__contains__(graph)

  def __getitem__(self, graph):
    own = self._own()
    return own[graph] if own is not None else super().__getitem__(graph)

  def __setitem__(self, graph, counter):
    own = self._own()
    if own is not None:
      own[graph] = counter
    else:
      super().__setitem__(graph, counter)

  def get(self, graph, default=None):
    own = self._own()
    return own.get(graph, default) if own is not None else super().get(
        graph, default)

  @contextlib.contextmanager
  def fresh(self):
    """Layer names made in this block, by this thread, count from zero."""
    saved = self._own()
    self._building.counters = {}
    try:
      yield
    finally:
      self._building.counters = saved


def counters():
  """The counters of the Keras in use (Keras 2.15 or tf-keras), made
  thread-aware once."""
  backend = sys.modules[tf.keras.backend.get_uid.__module__]
  if not isinstance(backend.PER_GRAPH_OBJECT_NAME_UIDS, NameCounters):
    backend.PER_GRAPH_OBJECT_NAME_UIDS = NameCounters(
        backend.PER_GRAPH_OBJECT_NAME_UIDS)
  return backend.PER_GRAPH_OBJECT_NAME_UIDS
