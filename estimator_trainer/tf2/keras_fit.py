"""The Keras engine: the same model compiled and fitted under
`strategy.scope()`, with the same data, evaluation and model_dir layout as the
other engines. Keras's compiled loss and metrics; the step (summed over
--accumulate_steps micro-batches, clipped, averaged) is updates.py's, as
in ctl.

fit runs from the step restored to the last in one "epoch"; a callback ends
each execution (of up to steps_per_loop steps) where the Controller stops
next, and checkpoints and evaluates where it is due, as ctl's loop does:
on multiples of save_checkpoints_steps whatever step a run resumes from.
Under parameter servers, where Keras refuses batch-level callbacks, fit
runs to each checkpoint step in turn.
"""

import tensorflow as tf

from estimator_trainer.data import ModeKeys
from estimator_trainer.tf2 import controller as controller_lib
from estimator_trainer.tf2 import exact_steps
from estimator_trainer.tf2 import preemption
from estimator_trainer.tf2 import updates as updates_lib

TRAIN = ModeKeys.TRAIN


class _Callback(tf.keras.callbacks.Callback):
  """Hands fit's progress to the Controller; stops fit at the configured
  step count, on SIGTERM or early stopping."""

  def __init__(self, controller):
    super().__init__()
    self._controller = controller

  def _after_steps(self, logs):
    """Summaries, progress and SIGTERM after the steps fit ran, then the
    checkpoint (and evaluation) if one is due."""
    controller = self._controller
    previous = controller.step
    # Keras's means since its metrics were reset.
    loss = float(logs['loss'])
    accuracy = logs.get('accuracy')
    others = ({'gradient_norm': float(logs['gradient_norm'])}
              if 'gradient_norm' in logs else {})
    if controller.after_steps(controller.job.step, loss, lambda: (
        loss, None if accuracy is None else float(accuracy), others)):
      self.model.reset_metrics()  # The next summary's: from this step on.
    if controller.checkpoint_due(previous):
      controller.checkpoint()
    if controller.done:
      self.model.stop_training = True


class _EpochCallback(_Callback):
  """Under parameter servers: at the end of each fit, a checkpoint step."""

  def on_epoch_end(self, epoch, logs=None):
    self._after_steps(logs)


class _BatchCallback(_Callback):
  """After every batch (an execution of up to steps_per_loop steps).

  Each execution ends where the controller stops next, as ctl's loops do:
  on a summary or checkpoint step, or on the last step. fit reads
  `steps_per_execution` before each execution; no execution is cut short
  by the epoch's end (which would restore the steps_per_execution it read
  over the next one planned here).
  """

  def __init__(self, controller):
    super().__init__(controller)
    self._planned = None  # The steps_per_execution last set.

  def on_train_begin(self, logs=None):
    self._plan()

  def on_train_batch_end(self, batch, logs=None):
    self._after_steps(logs)
    if not self._controller.done:
      self._plan()

  def _plan(self):
    steps = self._controller.steps_to_next_stop(
        self._controller.job.config.steps_per_loop)
    if steps != self._planned:
      self.model.steps_per_execution = steps
      self._planned = steps


class _FitModel(tf.keras.Model):
  """What fit trains: the job's model, whose optimizer step reads
  --accumulate_steps micro-batches (an element of their stack), each with
  Keras's compiled loss divided by their count, and applies their summed
  gradients as ctl does (updates.py)."""

  def __init__(self, job):
    super().__init__()
    self.inner = job.model
    self._micro_batches = job.config.accumulate_steps
    self._updates = updates_lib.Updates(job)
    self._claims = job.claims
    # The summed gradient's norm before clipping (a tracked metric: fit's
    # logs and reset_metrics include it).
    self.gradient_norm = (tf.keras.metrics.Mean(name='gradient_norm')
                          if job.config.clip_global_norm is not None
                          else None)

  def call(self, inputs, training=None):
    return self.inner(inputs, training=training)

  def train_step(self, data):
    count = self._micro_batches
    micro_batches = [data] if count == 1 else [
        tf.nest.map_structure(lambda tensor, i=i: tensor[i], data)
        for i in range(count)]

    def loss_of(micro_batch):
      x, y, weights = tf.keras.utils.unpack_x_y_sample_weight(micro_batch)
      y_pred = self.inner(x, training=True)
      # The loss before the metrics, in Keras's own train_step's order: the
      # other order failed an assertion in Keras's compiled containers
      # (regression and multilabel heads on 2 replicas).
      loss = self.compute_loss(x, y, y_pred, weights) / count
      self.compute_metrics(x, y, y_pred, weights)
      return loss

    _, norm = self._updates.step(micro_batches, loss_of)
    if norm is not None:
      self.gradient_norm.update_state(norm)
    return {metric.name: metric.result() for metric in self.metrics}

  def make_train_function(self, force=False):
    """Keras's, but under parameter servers each step first claims its
    number (exact_steps.py) and, without one, runs no train_step (nor its
    metrics): a closure the coordinator runs again does not apply its steps
    twice. The claim is outside strategy.run: the updates' merge_calls fail
    inside a tf.cond within it. (Keras's `_train_counter`, read by its
    TensorBoard and BackupAndRestore callbacks, unused here, is not kept.)"""
    if self._claims is None or (self.train_function is not None and
                                not force):
      return super().make_train_function(force)
    strategy = self.distribute_strategy

    @tf.function
    def train_function(iterator, steps):
      for _ in tf.range(steps):
        data = next(iterator)
        if self._claims.claim():
          strategy.run(self.train_step, (data,))
      # fit's logs: the metrics' means so far (as train_step returns them).
      return {metric.name: metric.result() for metric in self.metrics}

    self.train_function = lambda iterator: self._cluster_coordinator.schedule(
        train_function, args=(iterator, self._steps_per_execution.value()))
    return self.train_function


def _fit_element(keys):
  """fit's (inputs, labels[, sample weights]) of an input_fn element
  `(features, labels)`, its weights under `keys` (models.FeatureKeys)."""
  def element(features, labels):
    inputs = keys.inputs(features)
    if keys.weight in features:
      return inputs, labels, features[keys.weight]
    return inputs, labels
  return element


def _fit(job, evaluate):
  """Fits `job` (and evaluates, if `evaluate`); returns the finished
  Controller."""
  config = job.config
  step = job.restore()
  with job.strategy.scope():
    model = _FitModel(job)
    model.compile(
        optimizer=job.optimizer, loss=job.head.keras_loss(),
        metrics=job.head.keras_metrics(),
        steps_per_execution=config.steps_per_loop)
    # fit's logs are the metrics' results, already of the global batch on
    # every replica: Keras's default reduction ("auto": a sum, beyond TPUs)
    # would multiply them by the workers of a multi-worker cluster.
    model.distribute_reduction_method = 'first'
  with preemption.watch(job.strategy) as watched:
    controller = controller_lib.Controller(job, step, evaluate, watched)
    if step < job.max_steps:
      data = tf.keras.utils.experimental.DatasetCreator(
          lambda context: _micro_batches(
              job.input_fn(TRAIN, context).map(
                  _fit_element(job.feature_keys)),
              config.accumulate_steps),
          job.input_options())
      if job.coordinator:
        # A fit to each checkpoint step (a multiple of
        # save_checkpoints_steps, or the last): an epoch of its own, whose
        # end is all a callback sees here.
        callback = _EpochCallback(controller)
        every = config.save_checkpoints_steps
        while not controller.done:
          steps = min(every - controller.step % every,
                      job.max_steps - controller.step)
          # After a fit left short by a worker's failure (exact_steps.py),
          # a fit of the missing steps.
          stop = controller.step + steps
          job.claims.open(controller.step, stop)
          model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0,
                        callbacks=[callback])
          if controller.step < stop:
            exact_steps.log_short(controller.step, stop)
      else:
        model.fit(data, epochs=1, steps_per_epoch=job.max_steps - step,
                      verbose=0, callbacks=[_BatchCallback(controller)])
    controller.finish()
  return controller


def _micro_batches(dataset, count):
  """`dataset`'s elements stacked by `count` (a step's micro-batches)."""
  return dataset if count == 1 else dataset.batch(count, drop_remainder=True)


(train_and_evaluate, train, evaluate, predict,
 export) = controller_lib.engine_modes(_fit)
