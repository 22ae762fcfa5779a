"""Training summaries beyond Estimator's own (loss, global_step/sec)."""

import time

import tensorflow as tf


def scalar_summary(writer, tag, value, step):
  writer.add_summary(
      tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
          tag=tag, simple_value=value)]), step)


class ExamplesPerSecondHook(tf.estimator.SessionRunHook):
  """Writes `examples_per_second` (global and per replica) to model_dir.

  Measured between summaries, from global steps times the global batch, so
  it counts every replica's examples whichever task writes it.
  """

  def __init__(self, output_dir, global_batch_size, num_replicas,
               every_steps):
    self._output_dir = output_dir
    self._global_batch_size = global_batch_size
    self._num_replicas = num_replicas
    self._every_steps = every_steps
    self._last = None

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()
    self._writer = tf.compat.v1.summary.FileWriterCache.get(self._output_dir)

  def before_run(self, run_context):
    return tf.estimator.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    step, now = run_values.results, time.monotonic()
    if self._last is None:
      self._last = (step, now)  # Skips the first step: graph tracing.
      return
    steps, seconds = step - self._last[0], now - self._last[1]
    if steps >= self._every_steps and seconds > 0:
      rate = steps * self._global_batch_size / seconds
      scalar_summary(self._writer, 'examples_per_second', rate, step)
      scalar_summary(self._writer, 'examples_per_second_per_replica',
                     rate / self._num_replicas, step)
      self._last = (step, now)

  def end(self, session):
    self._writer.flush()
