"""The estimator engine's training loop around session.run: several steps
per run (TPUEstimator's iterations_per_loop), and what follows each run.

model_fn's train op takes `steps_per_run_variable()` steps, each on the next
batch of input_fn's iterator (graph.py); TrainLoopHook sets that variable
before every run so that runs end on checkpoint, summary and log steps and
on the last step. Estimator's own summary and step-counter hooks
assume one step per run: the job turns them off and this hook writes what
they wrote. Estimator's CheckpointSaverHook reads the global step after
every run, so it saves on the right steps as it is.
"""

import logging
import time

import tensorflow as tf

from estimator_trainer import cadence
from estimator_trainer import progress as progress_lib
from estimator_trainer import summaries

_logger = logging.getLogger(__name__)

# model_fn creates the variable and the hook, built before model_fn, finds it
# here: TPUEstimator finds its own steps_per_run variable the same way.
_COLLECTION = 'estimator_trainer_steps_per_run'


def steps_per_run_variable():
  """The training steps the next session.run takes: this graph's int32
  variable, local (never checkpointed), created on the first call."""
  graph = tf.compat.v1.get_default_graph()
  found = graph.get_collection(_COLLECTION)
  if found:
    return found[0]
  with tf.init_scope():
    return tf.compat.v1.get_variable(
        'steps_per_run', shape=[], dtype=tf.int32, trainable=False,
        initializer=tf.compat.v1.ones_initializer(), use_resource=True,
        collections=[_COLLECTION, tf.compat.v1.GraphKeys.LOCAL_VARIABLES])


class SaveClock(tf.compat.v1.train.CheckpointSaverListener):
  """The first saving listener: when the latest checkpoint save began."""

  def __init__(self):
    self._began = None

  def before_save(self, session, global_step_value):
    self._began = time.monotonic()

  def take(self):
    """When the save since the last call began, or None."""
    began, self._began = self._began, None
    return began


class TrainLoopHook(tf.compat.v1.train.SessionRunHook):
  """Plans each session.run's steps; after it: progress, training events
  and the loss log line (the chief's view).

  Events, as Estimator writes them: the graph's summaries (loss, accuracy,
  learning_rate) and examples_per_second (global and per replica) every
  `save_summary_steps`, global_step/sec every `log_step_count_steps`, the
  whole run's examples per second at the last step. Rates leave out the
  first run (graph optimization), the time between runs and checkpoints:
  Estimator's CheckpointSaverHook saves, evaluates and exports in its
  after_run, before this hook's, from when `save_clock` (a SaveClock, its
  first listener) says.
  """

  def __init__(self, config, max_steps, global_batch_size, num_replicas,
               steps_per_run, save_clock, loss_name):
    self._config = config
    self._max_steps = max_steps
    # Examples per optimizer step.
    self._global_batch_size = global_batch_size * config.accumulate_steps
    self._num_replicas = num_replicas
    self._steps_per_run = steps_per_run
    self._save_clock = save_clock
    self._progress = progress_lib.Progress(max_steps, self._global_batch_size,
                                           loss_name)

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()
    # The loss Estimator summed over the replicas' shares (the global
    # batch's mean loss), registered just before the hooks begin. Hooks
    # that model_fn returns could not see it: Estimator keeps the first
    # replica's.
    self._loss = tf.compat.v1.losses.get_losses()[-1]
    self._summary = tf.compat.v1.summary.merge_all()
    self._writer = tf.compat.v1.summary.FileWriterCache.get(
        self._config.model_dir)
    self._variable = (steps_per_run_variable() if self._steps_per_run > 1
                      else None)
    self._loaded = None  # The variable's value.
    self._timer = cadence.Timer()
    self._ran = None  # monotonic time at the end of the last after_run.

  def after_create_session(self, session, coord):
    self._step = session.run(self._global_step)
    self._plan(session)

  def _plan(self, session):
    """The next run's steps (cadence.steps_to_next_stop)."""
    self._steps = cadence.steps_to_next_stop(
        self._config, self._step, self._max_steps, self._steps_per_run)
    if self._variable is not None and self._steps != self._loaded:
      self._variable.load(self._steps, session)
      self._loaded = self._steps

  def before_run(self, run_context):
    if self._ran is not None:
      self._timer.exclude(time.monotonic() - self._ran)
    fetches = {'loss': self._loss}
    if self._summary is not None and cadence.summary_due(
        self._config, self._step, self._step + self._steps, self._max_steps):
      fetches['summary'] = self._summary
    return tf.compat.v1.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    before, now = self._step, time.monotonic()
    began = self._save_clock.take()
    if began is not None:
      self._timer.exclude(now - began)
    if self._config.strategy == 'parameter_server':
      # Other workers step too: read the step.
      self._step = run_context.session.run(self._global_step)
    else:  # Synchronous: the run took the planned steps.
      self._step += self._steps
    step = self._step
    loss = self._last_loss = run_values.results['loss']
    self._progress.update(step, loss)
    if 'summary' in run_values.results:
      self._writer.add_summary(run_values.results['summary'], step)
    if not self._timer.started:  # The first run: graph optimization.
      self._timer.start(step, now)
    else:
      self._after_timed_run(before, step, now, loss)
    if step >= self._max_steps:
      run_context.request_stop()
    else:
      self._plan(run_context.session)
    self._ran = time.monotonic()

  def _after_timed_run(self, before, step, now, loss):
    if cadence.summary_due(self._config, before, step, self._max_steps):
      steps, seconds = self._timer.since('summary', step, now)
      rate = steps * self._global_batch_size / seconds
      summaries.scalar_summary(self._writer, 'examples_per_second', rate,
                               step)
      summaries.scalar_summary(self._writer,
                               'examples_per_second_per_replica',
                               rate / self._num_replicas, step)
    if step >= self._max_steps:
      self._write_run_rate(step, now)
    if cadence.log_due(self._config, before, step):
      steps, seconds = self._timer.since('log', step, now)
      summaries.scalar_summary(self._writer, 'global_step/sec',
                               steps / seconds, step)
      # Estimator's LoggingTensorHook line; shown with --verbosity=1.
      _logger.debug('loss = %s, step = %d (%.3f sec)', loss, step, seconds)

  def _write_run_rate(self, step, now):
    steps, seconds = self._timer.since('start', step, now)
    summaries.scalar_summary(self._writer, summaries.RUN_RATE,
                             steps * self._global_batch_size / seconds, step)

  def end(self, session):
    if (self._config.strategy == 'parameter_server' and self._timer.started
        and self._step < self._max_steps):
      # The last run's step may have been refused, another worker's taking
      # the last one (step_apply.py): its after_run never came.
      step = session.run(self._global_step)
      if step >= self._max_steps:
        self._progress.update(step, self._last_loss)
        self._write_run_rate(step, time.monotonic())
    self._writer.flush()
    self._progress.close()
