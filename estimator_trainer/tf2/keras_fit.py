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
from estimator_trainer.tf2 import controller as controller_lib
from estimator_trainer.tf2 import job as job_lib
from estimator_trainer.tf2 import preemption

TRAIN = tf.estimator.ModeKeys.TRAIN


class _ControllerCallback(tf.keras.callbacks.Callback):
  """Hands fit's steps and epochs to the Controller; stops fit at the
  configured step count or on SIGTERM."""

  def __init__(self, controller):
    super().__init__()
    self._controller = controller

  def on_train_batch_end(self, batch, logs=None):
    loss = float(logs['loss'])  # Keras's: the mean since the epoch began.
    self._controller.after_steps(self._controller.job.step, loss,
                                 lambda: (loss, float(logs['accuracy'])))
    if self._controller.done:
      self.model.stop_training = True

  def on_epoch_end(self, epoch, logs=None):
    self._controller.checkpoint()
    if self._controller.done:  # Early stopping, after its evaluation.
      self.model.stop_training = True


def _fit(config, evaluate):
  """Fits (and evaluates, if `evaluate`); returns the finished Controller."""
  job = job_lib.Job(config)
  step = job.restore()
  with job.strategy.scope():
    job.model.compile(
        optimizer=job.optimizer,
        # Keras scales it per global batch itself, like our loss helper.
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
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
      job.model.fit(
          data, epochs=math.ceil(job.max_steps / every),
          initial_epoch=step // every, steps_per_epoch=every, verbose=0,
          callbacks=[tf.keras.callbacks.BackupAndRestore(backup),
                     _ControllerCallback(controller)])
    if tf.io.gfile.exists(backup) and not tf.io.gfile.listdir(backup):
      tf.io.gfile.rmtree(backup)  # Emptied by BackupAndRestore after fit.
    controller.finish()
  return controller


(train_and_evaluate, train, evaluate, predict,
 export) = controller_lib.engine_modes(_fit)
