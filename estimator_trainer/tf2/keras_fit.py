"""The Keras engine: the same model compiled and fitted under
`strategy.scope()`, with the same data, evaluation and model_dir layout as the
other engines.

A fit "epoch" is `save_checkpoints_steps` steps of the repeated training
dataset: the checkpoint and evaluation cadence, as under Estimator.
`BackupAndRestore` makes an interrupted fit resume where it stopped.
"""

import math

import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import losses
from estimator_trainer.data import ModeKeys
from estimator_trainer.tf2 import controller as controller_lib
from estimator_trainer.tf2 import preemption

TRAIN = ModeKeys.TRAIN


class _EpochCallback(tf.keras.callbacks.Callback):
  """Hands fit's epochs (of save_checkpoints_steps steps) to the Controller;
  stops fit at the configured step count, on SIGTERM or early stopping.

  Alone under parameter servers, where Keras refuses batch-level callbacks:
  summaries and the SIGTERM check then come once an epoch.
  """

  _PER_BATCH = False

  def __init__(self, controller):
    super().__init__()
    self._controller = controller

  def _after_steps(self, logs):
    loss = float(logs['loss'])  # Keras's: the mean since the epoch began.
    self._controller.after_steps(self._controller.job.step, loss,
                                 lambda: (loss, float(logs['accuracy'])))
    if self._controller.done:
      self.model.stop_training = True

  def on_epoch_end(self, epoch, logs=None):
    if not self._PER_BATCH:
      self._after_steps(logs)
    self._controller.checkpoint()
    if self._controller.done:  # Early stopping, after its evaluation.
      self.model.stop_training = True


class _BatchCallback(_EpochCallback):
  """And after every batch (an execution of up to steps_per_loop steps).

  Each execution ends where the controller stops next, as ctl's loops do:
  on a summary or checkpoint step (fit's epoch end), or on the last step,
  where fit would run a whole steps_per_execution past it. fit reads
  `steps_per_execution` before each execution.
  """

  _PER_BATCH = True

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


def _fit(job, evaluate):
  """Fits `job` (and evaluates, if `evaluate`); returns the finished
  Controller."""
  config = job.config
  step = job.restore()
  with job.strategy.scope():
    job.model.compile(
        optimizer=job.optimizer,
        loss=losses.KerasLoss(config.label_smoothing),
        metrics=['accuracy'], steps_per_execution=config.steps_per_loop)
  every = config.save_checkpoints_steps
  backup = layout.backup_dir(job.checkpoint_dir)
  with preemption.watch(job.strategy) as stop:
    controller = controller_lib.Controller(job, step, evaluate, stop)
    if step < job.max_steps:
      data = tf.keras.utils.experimental.DatasetCreator(
          lambda context: job.input_fn(TRAIN, context).map(
              lambda features, labels: (features['image'], labels)),
          job.input_options())
      # Parameter servers: BackupAndRestore refuses them, and Keras
      # batch-level callbacks; the chief's checkpoints resume there.
      callbacks = ([_EpochCallback(controller)] if job.coordinator else
                   [tf.keras.callbacks.BackupAndRestore(backup),
                    _BatchCallback(controller)])
      job.model.fit(
          data, epochs=math.ceil(job.max_steps / every),
          initial_epoch=step // every, steps_per_epoch=every, verbose=0,
          callbacks=callbacks)
    if tf.io.gfile.exists(backup) and not tf.io.gfile.listdir(backup):
      tf.io.gfile.rmtree(backup)  # Emptied by BackupAndRestore after fit.
    controller.finish()
  return controller


(train_and_evaluate, train, evaluate, predict,
 export) = controller_lib.engine_modes(_fit)
