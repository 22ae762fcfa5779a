"""A TF2 run: strategy, data, model, optimizer and checkpoints."""

import contextlib
import logging
import os

import numpy as np
import tensorflow as tf

from estimator_trainer import batch_norm
from estimator_trainer import checkpoints
from estimator_trainer import config_resolved
from estimator_trainer import data
from estimator_trainer import faults
from estimator_trainer import heads
from estimator_trainer import hparams as hparams_lib
from estimator_trainer import listen
from estimator_trainer import loss_scale
from estimator_trainer import model_recipe
from estimator_trainer import models
from estimator_trainer import optimizers
from estimator_trainer import outputs
from estimator_trainer import run_log
from estimator_trainer import training_progress
from estimator_trainer.models import tabular as tabular_models
from estimator_trainer.tf2 import ema
from estimator_trainer.tf2 import exact_steps
from estimator_trainer.tf2 import restore as restore_lib
from estimator_trainer.optimizers import OptimizerSpec
from estimator_trainer.strategy import configure_threads, make_strategy
from estimator_trainer.watchdog import cluster_watchdog

_logger = logging.getLogger(__name__)


def current_learning_rate(optimizer):
  # A variable, which Keras updates from the schedule at every step.
  return float(tf.convert_to_tensor(optimizer.learning_rate))


class Job:
  """A TF2 run: strategy, data, model and optimizer (with --linear_optimizer,
  one per part) under its scope, and a CheckpointManager (step = the
  optimizer's `iterations`).

  `training=False` (evaluate mode) builds no strategy: it restores the model
  alone, on this process's default devices. `migrating`: migrate's job,
  which holds a model and its optimizers' slots to write and trains nothing
  (its own lines say what it does; no Config line's training plan).
  """

  def __init__(self, config, training=True, migrating=False):
    # Migrate's model is the Estimator checkpoint's (migration.py).
    if not migrating:
      config = model_recipe.resolved(config)
    self.config = config
    outputs.require_writable_dir(config.model_dir)
    cluster = config.cluster
    self.is_chief = cluster is None or cluster.is_chief or not training
    self.watchdog = None
    self._progress = cluster and training_progress.TrainingProgress(config)
    if training and cluster:
      listen.warn_if_unconfined(cluster)
      # Creating the strategy (under the caller's TF_CONFIG, see
      # controller.engine_modes) already waits for the peers.
      self.watchdog = cluster_watchdog(config.cluster_timeout_secs,
                                       'training step')
    configure_threads(config.intra_op_threads, config.inter_op_threads)
    self.strategy = (make_strategy(config.strategy, config.cpu_replicas,
                                   config.communication, coordinated=True)
                     if training else None) or tf.distribute.get_strategy()
    # Parameter servers: this process (the chief) sends the steps to the
    # workers through a ClusterCoordinator; each applies its own, at once.
    self.coordinator = (
        tf.distribute.coordinator.ClusterCoordinator(self.strategy)
        if isinstance(self.strategy, tf.distribute.ParameterServerStrategy)
        else None)
    # Under parameter servers, each step claims its number (exact_steps).
    self.claims = (exact_steps.Claims(self.strategy)
                   if self.coordinator else None)
    self.num_replicas = self.strategy.num_replicas_in_sync
    self.global_batch_size = config.resolve_global_batch_size(
        self.num_replicas)
    self.source, self.max_steps, self.input_fn = data.prepare(
        config, self.global_batch_size, training,
        seeded=self.coordinator is None)
    spec = self.source.spec
    if not migrating:
      run_log.log_config(config, self.source, self.num_replicas,
                         self.global_batch_size, self.max_steps, training)
    self.example_format = self.source.serving
    # Where the input's features hold the example weights and padding.
    self.feature_keys = models.FeatureKeys.of(spec.model_input)
    self.head = heads.of_data(spec, config.head, config.label_smoothing,
                              config.huber_delta, image_summaries=True)
    self.weight_names = models.check(
        config.model, spec.model_input, self.head.logits_dimension,
        config.model_kwargs, config.precision, config.sync_batch_norm,
        inspect=config.linear_optimizer and tabular_models.linear_part)
    if training and self.is_chief:
      self.source.persist(config.model_dir)
    with self.strategy.scope():
      self.model = models.build(
          config.model, spec.model_input, self.head.logits_dimension,
          config.model_kwargs, seed=config.seed, precision=config.precision,
          sync_batch_norm=config.sync_batch_norm,
          weight_decay=config_resolved.weight_decay_of(config, spec))
      self.optimizer = self.linear_optimizer = None
      if training:
        spec = OptimizerSpec(config.optimizer, config.learning_rate,
                             config.lr_decay, self.max_steps,
                             config.optimizer_kwargs)
        # Under mixed_float16, with dynamic loss scaling (updates.py clips).
        self.optimizer = loss_scale.keras(spec.keras(), config.precision)
        if config.linear_optimizer:
          linear = spec.for_linear_part(config.linear_optimizer,
                                        config.linear_learning_rate,
                                        config.linear_optimizer_kwargs)
          self.linear_optimizer = loss_scale.keras(linear.keras(),
                                                   config.precision)
      self.ema = config.ema_decay and ema.Average(self.model,
                                                  config.ema_decay)
    # [(optimizer, variables)]: the wide part's first, with its own.
    self.optimizer_parts = training and optimizers.by_part(
        self.optimizer, self.model.trainable_variables,
        self.linear_optimizer and (self.linear_optimizer,
                                   tabular_models.linear_part(self.model)))
    self._batch_norm = (self._batch_norm_statistics() if training
                                else None)
    # The steps skipped on overflow under mixed_float16.
    self.skipped_steps = None
    if training and loss_scale.is_scaled(self.optimizer):
      with self.strategy.scope():
        self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    objects = {'model': self.model}
    if training:
      objects['optimizer'] = self.optimizer
    if self.skipped_steps is not None:
      objects['skipped_steps'] = self.skipped_steps
    if self.ema:
      objects['ema'] = self.ema
    if self.linear_optimizer:
      objects['linear_optimizer'] = self.linear_optimizer
    self.checkpointed = objects  # What a checkpoint holds, by name.
    self.checkpoint = tf.train.Checkpoint(**objects)
    # Every worker of a collective strategy saves; only the chief's counts.
    self.checkpoint_dir = config.model_dir if self.is_chief else (
        cluster.scratch_dir(config.model_dir))
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, self.checkpoint_dir,
        max_to_keep=config.keep_checkpoint_max, checkpoint_name='ckpt')

  def _batch_norm_statistics(self):
    """The precise-BN recompute of --bn_recompute_batches; without it, on
    the chief of a model with batch norm, the warning when the momentum
    leaves the moving statistics stale, or else their check at the last
    step. None otherwise."""
    config = self.config
    recompute = bool(config.bn_recompute_batches)
    if not recompute and (
        not self.is_chief or not batch_norm.layers(self.model) or
        batch_norm.warn_if_stale(self.model, self.max_steps)):
      return None  # Nothing to measure, or said already.
    # Its own pipeline, seeded (parameter-server workers' are not): the
    # first global batches of the training data, whatever the replicas.
    input_fn = data.make_input_fn(config, self.global_batch_size,
                                  self.source)
    return batch_norm.Recompute(
        self.model, lambda: input_fn(data.ModeKeys.TRAIN).map(
            lambda features, _: self.feature_keys.inputs(features)),
        config.bn_recompute_batches or batch_norm.CHECK_BATCHES, recompute)

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  def input_options(self):
    """How the strategy feeds input_fn's datasets to the replicas.

    Elements stay on the host (no GPU here to feed). Under MirroredStrategy
    each replica iterates its own pipeline (input_fn gets one InputContext
    per replica): no MultiDeviceIterator, whose per-device pipelines keep
    tf.data's autotuning on and made the iterator's teardown wait for it
    (45 s once after a 10-epoch run). MWMS has no such mode: one pipeline
    per worker.
    """
    per_replica = isinstance(self.strategy, tf.distribute.MirroredStrategy)
    return tf.distribute.InputOptions(
        experimental_fetch_to_device=False,
        experimental_replication_mode=(
            tf.distribute.InputReplicationMode.PER_REPLICA if per_replica
            else tf.distribute.InputReplicationMode.PER_WORKER))

  def distribute(self, mode, input_fn=None):
    """The dataset of `mode` of `input_fn` (default: the job's),
    distributed to the replicas (to each parameter-server worker, its own)."""
    input_fn = input_fn or self.input_fn
    dataset = self.strategy.distribute_datasets_from_function(
        lambda context: input_fn(mode, context), self.input_options())
    if self.coordinator:
      return self.coordinator.create_per_worker_dataset(dataset)
    return dataset

  def restore(self):
    """Restores the latest checkpoint of model_dir and returns its step;
    training without one warm-starts if asked to. A training chief then
    notes the model in model_dir."""
    step = restore_lib.latest_checkpoint(self)
    if self.optimizer is not None:
      if self.config.warm_start_from and not tf.train.latest_checkpoint(
          self.config.model_dir):
        restore_lib.warm_start(self)
      # After the restore: the checkpoint's values go into them as they
      # are made.
      self.make_slots()
      if self.is_chief:
        checkpoints.record_model(self.config.model_dir, self.config,
                                 self.source.spec, self.max_steps)
        if self.config.cluster:  # For the tasks that do not train.
          self._progress.write_train_spec(self.max_steps,
                                          self.global_batch_size)
    return step

  def make_slots(self):
    """Makes each part's optimizer slots (once), before the first step: a
    tf.function whose first call makes variables is traced twice (ctl's
    steps, fit's)."""
    with self.strategy.scope():
      for optimizer, variables in self.optimizer_parts:
        optimizer.build(variables)

  def check_checkpoint(self):
    """Fails unless model_dir's latest checkpoint holds this job's model;
    for a training job that will run no step, so restores the model alone
    (its optimizer would build no slots to restore the checkpoint's into)."""
    restore_lib.latest_checkpoint(self,
                                  tf.train.Checkpoint(model=self.model))

  def averaged(self):
    """A context in which a training job's model holds the averages of
    --ema_decay (evaluation and export); its own weights without."""
    if self.ema and self.optimizer is not None:
      return self.ema.swapped_in()
    return contextlib.nullcontext()

  def save(self, step):
    """Checkpoints `step`, with the batch-norm statistics recomputed when
    asked (--bn_recompute_batches); never NaN or Inf weights (faults.py)."""
    if self._batch_norm and self.config.bn_recompute_batches:
      # The statistics of what evaluation and export use: with
      # --ema_decay, the averaged weights.
      with self.averaged():
        self._batch_norm()
    elif self._batch_norm and step == self.max_steps:
      self._batch_norm.check(step)
    if not all(np.isfinite(w.numpy()).all() for w in self.model.weights):
      raise faults.diverged('weights are NaN or Inf', step,
                            self.config.model_dir)
    path = self.manager.save(checkpoint_number=step)
    if self.is_chief:
      _logger.info('Saved checkpoint %s', path)
    if self.watchdog:
      self.watchdog.kick()

  def hparams(self):
    return hparams_lib.run_hparams(self.config, self.source.spec,
                                 self.num_replicas,
                                 self.global_batch_size, self.max_steps)

  def finish(self, trained):
    """Ends a training job: stops the watchdog, removes a worker's scratch;
    a cluster task that `trained` to the end says so (training_progress)."""
    if self.watchdog:
      self.watchdog.stop()
    if not self.is_chief and tf.io.gfile.exists(self.checkpoint_dir):
      tf.io.gfile.rmtree(self.checkpoint_dir)
    if trained and self.config.cluster:
      self._progress.mark_finished(self.max_steps)


def writer(job, subdir=''):
  """A summary writer on the chief; writes nothing elsewhere."""
  if not job.is_chief:
    return tf.summary.create_noop_writer()
  return tf.summary.create_file_writer(
      os.path.join(job.config.model_dir, subdir))
