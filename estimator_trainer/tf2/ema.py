"""--ema_decay=d in the TF2 engines: an exponential moving average of the
model's weights (trainable ones and batch norm's moving statistics), which
evaluation, --export and metrics.json use while the raw weights train.

The recipe: after every step (skipped float16 steps included),
`average = d * average + (1 - d) * weight`, except after step 1, where the
average becomes the weights (Keras's `use_ema` recipe: so a warm-started
run averages its own weights, not the initializers'); no zero-debiasing and
no warm-up of d. Not Keras's `use_ema` itself: its averages replace the
weights only at the end (`finalize_variable_values`), and evaluation mid-run
must see them without stopping the training. estimator/moving_average.py
has the same recipe in a v1 graph.
"""

import contextlib

import tensorflow as tf

from estimator_trainer.errors import UsageError


class Average(tf.Module):
  """The averages of `model.weights`, checkpointed as the job's `ema`."""

  def __init__(self, model, decay):
    super().__init__(name='ema')
    self._decay = decay
    self._weights = model.weights
    self.averages = [
        tf.Variable(weight.read_value(), trainable=False,
                    name=weight.name.split(':')[0].replace('/', '_'))
        for weight in self._weights]

  def update(self, step):
    """The average after optimizer step `step` (counted from 1); in
    cross-replica context."""
    decay = tf.where(tf.equal(step, 1), 0.0, self._decay)
    for average, weight in zip(self.averages, self._weights):
      average.assign(decay * average + (1 - decay) *
                     tf.cast(weight, average.dtype))

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


def require_average(path):
  """Fails unless checkpoint `path` holds an Average (a run resumed or
  evaluated with --ema_decay must have trained with it)."""
  if not any(name.startswith('ema/')
             for name, _ in tf.train.list_variables(path)):
    raise UsageError(f'--ema_decay: {path} holds no average (trained '
                     'without --ema_decay)')
