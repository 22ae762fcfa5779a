"""--ema_decay=d in the TF2 engines: an exponential moving average of the
model's trainable weights (ema_recipe.averaged), which evaluation, --export
and metrics.json use while the raw weights train.

The recipe is ema_recipe.py's, as in the estimator engine. Not Keras's
`use_ema` itself: its averages replace the weights only at the end
(`finalize_variable_values`), and evaluation mid-run must see them without
stopping the training.
"""

import contextlib
import re

import tensorflow as tf

from estimator_trainer import ema_recipe
from estimator_trainer.errors import UsageError


class Average(tf.Module):
  """The averages of the model's trainable weights, checkpointed as the
  job's `ema`."""

  def __init__(self, model, decay):
    super().__init__(name='ema')
    self._decay = decay
    self._weights = ema_recipe.averaged(model)
    self.averages = [
        tf.Variable(weight.read_value(), trainable=False,
                    name=weight.name.split(':')[0].replace('/', '_'))
        for weight in self._weights]

  def update(self, step):
    """The average after optimizer step `step` (counted from 1); in
    cross-replica context."""
    ema_recipe.moved(self.averages, self._weights, self._decay, step)

  def adopt(self, legacy):
    """Takes the averages of the trainable weights from `legacy`
    (stored_layout's, restored)."""
    for average, value in zip(self.averages, legacy.trainable_averages()):
      average.assign(value)

  def copy_to_model(self):
    for average, weight in zip(self.averages, self._weights):
      weight.assign(average)

  @contextlib.contextmanager
  def swapped_in(self):
    """The model holds the averages inside, its own weights after."""
    raw = [tf.identity(weight) for weight in self._weights]
    self.copy_to_model()
    try:
      yield
    finally:
      for weight, value in zip(self._weights, raw):
        weight.assign(value)


_AVERAGE_KEY = re.compile(r'ema/averages/\d+/\.ATTRIBUTES/VARIABLE_VALUE')


class _Legacy(tf.Module):
  """A checkpoint's averages of every weight of the model, batch norm's
  statistics included, as --ema_decay kept them before it averaged the
  trainable weights only (development versions after 0.2.0)."""

  def __init__(self, model):
    super().__init__(name='ema')
    averaged = {id(weight) for weight in ema_recipe.averaged(model)}
    self._averaged = [id(weight) in averaged for weight in model.weights]
    self.averages = [tf.Variable(tf.zeros(weight.shape, weight.dtype),
                                 trainable=False) for weight in model.weights]

  def trainable_averages(self):
    return [average for average, averaged
            in zip(self.averages, self._averaged) if averaged]


def stored_layout(path, model):
  """Fails unless checkpoint `path` holds averages (a run resumed or
  evaluated with --ema_decay must have trained with it). Where they are
  of every weight of `model` (_Legacy's: batch norm's statistics too, at
  positions that now hold other weights' averages), returns the stand-in
  to restore them into; else None."""
  stored = sum(1 for name, _ in tf.train.list_variables(path)
               if _AVERAGE_KEY.fullmatch(name))
  if not stored:
    raise UsageError(f'--ema_decay: {path} holds no average (trained '
                     'without --ema_decay)')
  if stored == len(ema_recipe.averaged(model)) or stored != len(model.weights):
    return None
  return _Legacy(model)
