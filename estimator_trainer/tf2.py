"""What the TF2 engines (ctl, keras) share: strategy, data, model, optimizer,
checkpoints, evaluation, and the Estimator engine's model_dir layout
(training events in model_dir, evaluation events in model_dir/eval,
metrics.json)."""

import os
import time

from absl import logging
import numpy as np
import tensorflow as tf

from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer import listen
from estimator_trainer import losses
from estimator_trainer import outputs
from estimator_trainer import progress as progress_lib
from estimator_trainer import summaries
from estimator_trainer.data import CLASS_NAMES, TRAIN, make_input_fn, make_source
from estimator_trainer.errors import TrainerError
from estimator_trainer.model import create_model
from estimator_trainer.strategy import configure_threads, make_strategy
from estimator_trainer.watchdog import Watchdog

EVAL = tf.estimator.ModeKeys.EVAL


def make_optimizer(config, decay_steps):
  """The estimator engine's optimizer and schedule, as a Keras optimizer."""
  learning_rate = config.learning_rate
  if config.lr_decay == 'cosine':
    learning_rate = tf.keras.optimizers.schedules.CosineDecay(learning_rate,
                                                              decay_steps)
  if config.optimizer == 'adam':
    # tf.compat.v1.train.AdamOptimizer's epsilon, as the estimator engine.
    return tf.keras.optimizers.Adam(learning_rate, epsilon=1e-8)
  return tf.keras.optimizers.SGD(learning_rate)


def current_learning_rate(optimizer):
  # A variable, which Keras updates from the schedule at every step.
  return float(tf.convert_to_tensor(optimizer.learning_rate))


class Job:
  """A TF2 run: strategy, data, model and optimizer under its scope, and a
  CheckpointManager (step = the optimizer's `iterations`).

  `training=False` (evaluate mode) builds no strategy: it restores the model
  alone, on this process's default devices.
  """

  def __init__(self, config, training=True):
    self.config = config
    outputs.require_writable_dir(config.model_dir)
    cluster = config.cluster
    self.is_chief = cluster is None or cluster.is_chief or not training
    self.watchdog = None
    if training and cluster:
      listen.warn_if_unconfined(cluster)
      os.environ['TF_CONFIG'] = cluster.tf_config()
      # Creating the strategy already waits for the peers.
      self.watchdog = Watchdog(
          config.cluster_timeout_secs,
          f'no training step in {config.cluster_timeout_secs} s: a cluster '
          'task never started or died (--cluster_timeout_secs)')
    configure_threads(config.intra_op_threads, config.inter_op_threads)
    self.strategy = (make_strategy(config.strategy, config.cpu_replicas,
                                   config.communication) if training else None
                     ) or tf.distribute.get_strategy()
    self.num_replicas = self.strategy.num_replicas_in_sync
    self.global_batch_size = config.resolve_global_batch_size(
        self.num_replicas)
    self.source = make_source(config)
    self.max_steps = config.resolve_train_steps(
        self.source.num_examples(TRAIN),
        self.global_batch_size) if training else None
    self.input_fn = make_input_fn(config, self.global_batch_size, self.source)
    with self.strategy.scope():
      self.model = create_model(seed=config.seed,
                                weight_decay=config.weight_decay,
                                precision=config.precision)
      self.optimizer = (make_optimizer(config, self.max_steps)
                        if training else None)
    objects = {'model': self.model}
    if training:
      objects['optimizer'] = self.optimizer
    self.checkpoint = tf.train.Checkpoint(**objects)
    # Every worker of a collective strategy saves; only the chief's counts.
    self.checkpoint_dir = config.model_dir if self.is_chief else (
        cluster.scratch_dir(config.model_dir))
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, self.checkpoint_dir,
        max_to_keep=config.keep_checkpoint_max, checkpoint_name='ckpt')

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

  def distribute(self, mode):
    """The input_fn's dataset of `mode`, distributed to the replicas."""
    return self.strategy.distribute_datasets_from_function(
        lambda context: self.input_fn(mode, context), self.input_options())

  def restore(self):
    """Restores the latest checkpoint of model_dir; returns its step."""
    path = tf.train.latest_checkpoint(self.config.model_dir)
    if not path:
      return 0
    logging.info('Restoring %s', path)
    try:
      status = self.checkpoint.restore(path)
      status.assert_existing_objects_matched()
      if self.optimizer is None:
        status.expect_partial()  # Evaluation needs no optimizer slots.
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      message = (str(e).strip().splitlines() or [''])[0]
      raise TrainerError(
          f'{self.config.model_dir} holds a checkpoint of a different model '
          f'or engine: {message}') from None
    return layout.checkpoint_step(path)

  def save(self, step):
    """Checkpoints `step`; never NaN or Inf weights (faults.py)."""
    if not all(np.isfinite(w.numpy()).all() for w in self.model.weights):
      raise faults.diverged('weights are NaN or Inf', step,
                            self.config.model_dir)
    path = self.manager.save(checkpoint_number=step)
    if self.is_chief:
      logging.info('Saved checkpoint %s', path)
    if self.watchdog:
      self.watchdog.kick()

  def hparams(self):
    return summaries.run_hparams(self.config, self.num_replicas,
                                 self.global_batch_size, self.max_steps)

  def finish(self):
    """Ends a training job: stops the watchdog, removes a worker's scratch."""
    if self.watchdog:
      self.watchdog.stop()
    if not self.is_chief and tf.io.gfile.exists(self.checkpoint_dir):
      tf.io.gfile.rmtree(self.checkpoint_dir)


def _writer(job, subdir=''):
  """A summary writer on the chief; writes nothing elsewhere."""
  if not job.is_chief:
    return tf.summary.create_noop_writer()
  return tf.summary.create_file_writer(
      os.path.join(job.config.model_dir, subdir))


class Evaluator:
  """Evaluates the model on the whole test set (each example once) under the
  job's strategy; writes model_dir/eval as the estimator engine does."""

  def __init__(self, job):
    self._job = job
    class_names = CLASS_NAMES[job.config.dataset]
    with job.strategy.scope():
      self._metrics = {
          'accuracy': tf.keras.metrics.Accuracy(),
          'average_loss': tf.keras.metrics.Mean(),  # Per example: exact.
          'loss': tf.keras.metrics.Mean(),  # Of batch means: Estimator's.
          'num_examples': tf.keras.metrics.Sum(),
      }
      self._images = [summaries.ConfusionMatrixImage(class_names),
                      summaries.MisclassifiedImage(class_names)]
    self._dataset = job.distribute(EVAL)
    self._writer = _writer(job, layout.EVAL_DIR)

  def _replica_step(self, features, labels):
    logits = self._job.model(features['image'], training=False)
    classes = tf.argmax(logits, axis=1)
    weights = features['weight']
    metrics = self._metrics
    metrics['accuracy'].update_state(labels, classes, sample_weight=weights)
    metrics['average_loss'].update_state(
        losses.per_example_loss(labels, logits), sample_weight=weights)
    metrics['loss'].update_state(
        losses.weighted_mean_loss(labels, logits, weights))
    metrics['num_examples'].update_state(weights)
    self._images[0].update_state(labels, classes, weights)
    self._images[1].update_state(features['image'], labels, classes, weights)

  @tf.function
  def _run(self):
    for features, labels in self._dataset:
      self._job.strategy.run(self._replica_step, (features, labels))

  def evaluate(self, step):
    """Returns Estimator's eval dict (accuracy, loss, ..., global_step)."""
    for metric in [*self._metrics.values(), *self._images]:
      metric.reset_state()
    start = time.monotonic()
    self._run()
    result = {name: metric.result().numpy()
              for name, metric in self._metrics.items()}
    result['global_step'] = step
    with self._writer.as_default(step=step):
      for name, value in result.items():
        if name != 'global_step':
          tf.summary.scalar(name, value)
      for image in self._images:
        tf.summary.experimental.write_raw_pb(image.result())
    self._writer.flush()
    logging.info('Evaluation at step %d (%.1f s): %s', step,
                 time.monotonic() - start, result)
    return result


class TrainSummaries:
  """Training events and progress, as the estimator engine writes them: loss,
  accuracy, learning_rate, global_step/sec, examples_per_second (global and
  per replica) every `save_summary_steps`; on the chief only."""

  def __init__(self, job, start_step):
    self._job = job
    self._every = job.config.save_summary_steps
    self._writer = _writer(job)
    self._last = None  # (step, time); the first interval includes tracing.
    self._last_written = start_step
    self._progress = (progress_lib.Progress(job.max_steps,
                                            job.global_batch_size)
                      if job.is_chief else None)
    with self._writer.as_default(step=start_step):
      for summary in summaries.hparams_summaries(job.hparams()):
        tf.summary.experimental.write_raw_pb(summary)

  def update(self, step, loss, read_metrics):
    """After training to `step` (`loss`: the latest, for the progress line).

    `read_metrics()` returns the mean loss and accuracy per example since
    the previous summary; it is called only when a summary is due (reading
    metrics costs a few ops per call). Returns True when it wrote a summary
    (so the caller resets its metrics).
    """
    now = time.monotonic()
    if self._progress:
      self._progress.update(step, loss)
    if self._last is None:
      self._last = (step, now)
    if step // self._every == self._last_written // self._every and (
        step < self._job.max_steps):
      return False
    loss, accuracy = read_metrics()
    with self._writer.as_default(step=step):
      tf.summary.scalar('loss', loss)
      tf.summary.scalar('accuracy', accuracy)
      tf.summary.scalar('learning_rate',
                        current_learning_rate(self._job.optimizer))
      if step > self._last[0]:
        steps_per_second = (step - self._last[0]) / (now - self._last[1])
        examples = steps_per_second * self._job.global_batch_size
        tf.summary.scalar('global_step/sec', steps_per_second)
        tf.summary.scalar('examples_per_second', examples)
        tf.summary.scalar('examples_per_second_per_replica',
                          examples / self._job.num_replicas)
    self._last = (step, now)
    self._last_written = step
    return True

  def close(self):
    self._writer.flush()
    if self._progress:
      self._progress.close()


def write_results(job, result):
  """metrics.json of a training job's final evaluation, on the chief; None
  elsewhere, or when preempted (`result` None)."""
  if not job.is_chief or result is None:
    return None
  return outputs.write_eval_metrics(job.config.model_dir, result)


def evaluate(config):
  """--mode evaluate: restores the latest checkpoint's model, with no
  strategy, and evaluates it; writes model_dir/eval and metrics.json."""
  job = Job(config, training=False)
  step = job.restore()
  if not step:
    raise TrainerError(f'no checkpoint in {config.model_dir}; train first')
  return outputs.write_eval_metrics(config.model_dir,
                                    Evaluator(job).evaluate(step))
