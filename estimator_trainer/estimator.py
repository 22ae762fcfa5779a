"""The Estimator engine: model_fn, RunConfig factory and the run modes."""

import contextlib
import dataclasses
import itertools
import json
import os
import time

from absl import logging
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import early_stopping
from estimator_trainer import export as export_lib
from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer import listen
from estimator_trainer import losses
from estimator_trainer import outputs
from estimator_trainer import progress
from estimator_trainer import summaries
from estimator_trainer.config import TrainConfig
from estimator_trainer.data import CLASS_NAMES, TRAIN, make_input_fn, make_source
from estimator_trainer.errors import TrainerError
from estimator_trainer.model import create_model
from estimator_trainer.strategy import make_strategy, num_replicas
from estimator_trainer.watchdog import Watchdog, WatchdogHook

ModeKeys = tf.estimator.ModeKeys
_OPTIMIZERS = {
    'adam': tf.compat.v1.train.AdamOptimizer,
    'sgd': tf.compat.v1.train.GradientDescentOptimizer,
}


def _train_op(optimizer, loss, variables):
  """Applies the gradients of `loss`, which is already per global batch.

  Not `optimizer.minimize`: under Estimator its `compute_gradients` divides
  the loss again by the replica count (`Optimizer._scale_loss`, tensorflow
  #35333). `apply_gradients` sums the replicas' gradients, which is right for
  a loss divided by the global batch.
  """
  grads = tf.compat.v1.gradients(loss, variables)
  return optimizer.apply_gradients(
      zip(grads, variables),
      global_step=tf.compat.v1.train.get_or_create_global_step())


def _learning_rate(params):
  """`learning_rate`, decayed to 0 at `decay_steps` under `lr_decay=cosine`."""
  if params.get('lr_decay', 'none') == 'none':
    return params['learning_rate']
  return tf.compat.v1.train.cosine_decay(
      params['learning_rate'], tf.compat.v1.train.get_or_create_global_step(),
      params['decay_steps'])


def model_fn(features, labels, mode, params):
  """Estimator model_fn for TRAIN, EVAL and PREDICT.

  `features` is `{'image': float32 [batch, 28, 28, 1]}` (EVAL may add a
  `'weight'` per example, 0 for padding); `params` holds `optimizer`,
  `learning_rate`, `global_batch_size` and optionally `lr_decay` ('cosine'
  needs `decay_steps`), `seed`, `weight_decay`.
  """
  model = create_model(seed=params.get('seed'),
                       weight_decay=params.get('weight_decay', 0.0),
                       precision=params.get('precision', 'float32'))
  logits = model(features['image'], training=mode == ModeKeys.TRAIN)
  predictions = {
      'classes': tf.argmax(logits, axis=1),
      'probabilities': tf.nn.softmax(logits),
      'logits': logits,
  }
  if mode == ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(
        mode, predictions=predictions,
        export_outputs={'serving_default':
                        tf.estimator.export.PredictOutput(predictions)})

  if mode == ModeKeys.EVAL:
    weights = features.get('weight', tf.ones_like(labels, tf.float32))
    num_examples = tf.keras.metrics.Sum(name='num_examples')
    num_examples.update_state(weights)
    metrics = {
        'accuracy': tf.compat.v1.metrics.accuracy(
            labels, predictions['classes'], weights=weights),
        'average_loss': tf.compat.v1.metrics.mean(
            losses.per_example_loss(labels, logits), weights=weights),
        'num_examples': num_examples,
    }
    # Image summaries (strings, left out of metrics.json). Rendered by
    # tf.py_function, so not in graphs saved for another process (TFMA).
    if params.get('eval_images', True):
      class_names = CLASS_NAMES[params.get('dataset', 'mnist')]
      metrics['confusion_matrix'] = summaries.ConfusionMatrixImage(
          class_names)
      metrics['confusion_matrix'].update_state(labels, predictions['classes'],
                                               weights)
      metrics['misclassified'] = summaries.MisclassifiedImage(class_names)
      metrics['misclassified'].update_state(
          features['image'], labels, predictions['classes'], weights)
    # A per-replica mean, not a share of the global batch: Estimator averages
    # the replicas' `loss`. `average_loss` is exact over the whole test set.
    return tf.estimator.EstimatorSpec(
        mode, loss=losses.weighted_mean_loss(labels, logits, weights),
        eval_metric_ops=metrics)

  loss = losses.replica_training_loss(labels, logits,
                                      params['global_batch_size'],
                                      model.losses)
  learning_rate = _learning_rate(params)
  # v1 summaries: written for the first replica only, at save_summary_steps.
  tf.compat.v1.summary.scalar('learning_rate', learning_rate)
  tf.compat.v1.summary.scalar('accuracy', tf.reduce_mean(
      tf.cast(tf.equal(predictions['classes'], labels), tf.float32)))
  tf.compat.v1.add_to_collection(progress.REPLICA_LOSSES, loss)
  optimizer = _OPTIMIZERS[params['optimizer']](learning_rate)
  return tf.estimator.EstimatorSpec(
      mode, loss=loss,
      train_op=_train_op(optimizer, loss, model.trainable_variables))


def make_run_config(config):
  """A RunConfig with `train_distribute`/`eval_distribute` from `config`."""
  listen.warn_if_unconfined(config.cluster)
  session_config = tf.compat.v1.ConfigProto(
      allow_soft_placement=True,
      intra_op_parallelism_threads=config.intra_op_threads,
      inter_op_parallelism_threads=config.inter_op_threads)
  if config.cpu_replicas > 1:
    # Estimator runs v1 sessions: they need the logical CPUs too.
    session_config.device_count['CPU'] = config.cpu_replicas
  return tf.estimator.RunConfig(
      model_dir=config.model_dir,
      tf_random_seed=config.seed,
      save_summary_steps=config.save_summary_steps,
      save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max,
      log_step_count_steps=config.log_step_count_steps,
      session_config=session_config,
      train_distribute=make_strategy(config.strategy, config.cpu_replicas,
                                     config.communication),
      eval_distribute=make_strategy(config.eval_strategy, config.cpu_replicas,
                                    config.communication))


class _Job:
  """What every mode shares: run config, data, input_fn and Estimator."""

  def __init__(self, config, training=True, eval_images=True):
    self.config = config
    outputs.require_writable_dir(config.model_dir)
    self.run_config = make_run_config(config)
    self.global_batch_size = config.resolve_global_batch_size(
        num_replicas(self.run_config.train_distribute))
    self.source = make_source(config)
    # Only training needs the train split's size (reading it is not free).
    self.max_steps = config.resolve_train_steps(
        self.source.num_examples(TRAIN),
        self.global_batch_size) if training else None
    self.input_fn = make_input_fn(config, self.global_batch_size, self.source)
    warm_start = None
    if config.warm_start_from:
      warm_start = tf.estimator.WarmStartSettings(
          config.warm_start_from, vars_to_warm_start=config.warm_start_vars)
    params = dict(config.model_params(self.global_batch_size, self.max_steps),
                  eval_images=eval_images)
    checkpoints.check_compatible(config.model_dir, model_fn, params, training)
    self.estimator = tf.estimator.Estimator(
        model_fn, config=self.run_config, warm_start_from=warm_start,
        params=params)

  @property
  def is_chief(self):
    return self.config.cluster is None or self.config.cluster.is_chief

  @property
  def num_replicas(self):
    return num_replicas(self.run_config.train_distribute)

  def train_hooks(self):
    hooks = [faults.NonFiniteLossHook(self.config.model_dir)]
    if self.is_chief:  # Only the chief writes events and shows progress.
      hooks.append(summaries.HParamsHook(self.config.model_dir,
                                         self.hparams()))
      hooks.append(summaries.ExamplesPerSecondHook(
          self.config.model_dir, self.global_batch_size, self.num_replicas,
          self.config.save_summary_steps))
      hooks.append(progress.ProgressHook(
          progress.Progress(self.max_steps, self.global_batch_size),
          self.num_replicas))
    if self.config.early_stopping_evals:
      hooks.append(early_stopping.make_hook(self.estimator,
                                            self.config.early_stopping_evals))
    return hooks

  def hparams(self):
    return summaries.run_hparams(self.config, self.num_replicas,
                                 self.global_batch_size, self.max_steps)

  def write_metrics(self, eval_result):
    return outputs.write_eval_metrics(self.config.model_dir, eval_result)


def _write_train_spec(job):
  """Tells the evaluator and parameter servers when training is over."""
  outputs.write_atomic(
      layout.train_spec_file(job.config.model_dir),
      json.dumps({'max_steps': job.max_steps,
                  'global_batch_size': job.global_batch_size}) + '\n')


def _read_train_spec(config, watchdog):
  """Waits (bounded by the watchdog) for the chief's train spec."""
  path = layout.train_spec_file(config.model_dir)
  while not tf.io.gfile.exists(path):
    time.sleep(1)
  with tf.io.gfile.GFile(path) as f:
    spec = json.load(f)
  watchdog.kick()
  return spec


def _checkpoint_step(model_dir):
  path = tf.train.latest_checkpoint(model_dir)
  return layout.checkpoint_step(path) if path else -1


@contextlib.contextmanager
def _outside_cluster():
  """Hides TF_CONFIG: evaluation runs on this task alone, not in the cluster.

  With TF_CONFIG, RunConfig would point the evaluation session at the
  cluster's master and filter its devices.
  """
  saved = os.environ.pop('TF_CONFIG', None)
  try:
    yield
  finally:
    if saved is not None:
      os.environ['TF_CONFIG'] = saved


def _eval_job(config):
  """A job that only evaluates or predicts, on this task's own devices."""
  with _outside_cluster():
    return _Job(dataclasses.replace(config, strategy='default', cluster=None),
                training=False)


def _watchdog(config, waiting_for):
  return Watchdog(
      config.cluster_timeout_secs,
      f'no {waiting_for} in {config.cluster_timeout_secs} s: a cluster task '
      'never started or died (--cluster_timeout_secs)')


def _mark_finished(job):
  """Records that this training task is done with these max_steps."""
  cluster = job.config.cluster
  outputs.write_atomic(
      layout.finished_file(job.config.model_dir, cluster.task_type,
                           cluster.task_index),
      json.dumps({'max_steps': job.max_steps}) + '\n')


def _num_finished(config, max_steps):
  """How many training tasks finished training to `max_steps`."""
  count = 0
  for task_type in (cluster_lib.CHIEF, cluster_lib.WORKER):
    for index in range(len(config.cluster.jobs.get(task_type, []))):
      path = layout.finished_file(config.model_dir, task_type, index)
      if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
          count += json.load(f)['max_steps'] == max_steps
  return count


def _serve_parameters(config):
  """A ps task: serves variables until every training task has finished.

  Exiting at the final checkpoint is too early: the other workers still
  need the ps to see that training is over (tensorflow#21305).
  """
  cluster = config.cluster
  tf.distribute.Server(tf.train.ClusterSpec(cluster.jobs),
                       job_name=cluster_lib.PS,
                       task_index=cluster.task_index, start=True)
  watchdog = _watchdog(config, 'new checkpoint')
  max_steps = _read_train_spec(config, watchdog)['max_steps']
  progress = None
  while progress is None or progress[1] < cluster.num_trainers:
    time.sleep(1)
    new_progress = (_checkpoint_step(config.model_dir),
                    _num_finished(config, max_steps))
    if new_progress != progress:
      progress = new_progress
      watchdog.kick()
  watchdog.stop()
  logging.info('Training finished at step %d: parameter server exits',
               progress[0])


def _chief_finished(config, max_steps):
  cluster = config.cluster
  chief = (cluster_lib.CHIEF if cluster_lib.CHIEF in cluster.jobs
           else cluster_lib.WORKER)
  path = layout.finished_file(config.model_dir, chief, 0)
  if not tf.io.gfile.exists(path):
    return False
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)['max_steps'] == max_steps


def _evaluate_until_trained(config):
  """The evaluator task: evaluates each new checkpoint until the last one.

  The last one is at max_steps, or whatever the chief saved when it
  finished earlier (early stopping).
  """
  watchdog = _watchdog(config, 'new checkpoint')
  max_steps = _read_train_spec(config, watchdog)['max_steps']
  job = _eval_job(config)
  exporters = _exporters(config)  # Once: BestExporter remembers the best.

  result, final = None, False
  for checkpoint in tf.train.checkpoints_iterator(
      config.model_dir, min_interval_secs=1, timeout=5,
      timeout_fn=lambda: _chief_finished(config, max_steps)):
    watchdog.kick()
    evaluated = _evaluate_and_export(job, exporters, checkpoint, max_steps)
    watchdog.kick()
    if evaluated is not None:
      result = evaluated
      final = result['global_step'] >= max_steps
      if final:
        break
  if not final:  # Training stopped early: its last checkpoint is final.
    checkpoint = tf.train.latest_checkpoint(config.model_dir)
    if result is None or result['global_step'] < _checkpoint_step(
        config.model_dir):
      result = job.estimator.evaluate(job.input_fn, steps=None,
                                      checkpoint_path=checkpoint)
    _export(job, exporters, checkpoint, result, True)
  watchdog.stop()
  return job.write_metrics(result)


def _evaluate_and_export(job, exporters, checkpoint, max_steps):
  """Evaluates and exports a checkpoint of the running training; returns
  the evaluation, or None when training deleted the checkpoint first.

  Training keeps its latest --keep_checkpoint_max checkpoints: while the
  evaluator builds its graph and evaluates, a fast trainer may delete the
  one it started on. The evaluator then goes on to the newest.
  """
  try:
    result = job.estimator.evaluate(job.input_fn, steps=None,
                                    checkpoint_path=checkpoint)
    _export(job, exporters, checkpoint, result,
            result['global_step'] >= max_steps)
    return result
  # Saver.restore: ValueError when the files are gone, NotFoundError when
  # they go while it reads them.
  except (ValueError, tf.errors.NotFoundError):
    if tf.io.gfile.exists(f'{checkpoint}.index'):
      raise
    logging.warning('%s was deleted (--keep_checkpoint_max=%d) before its '
                    'evaluation ended: evaluating a newer one', checkpoint,
                    job.config.keep_checkpoint_max)
    return None


def _remove_scratch_dir(config):
  """Deletes a non-chief worker's scratch dir, where TensorFlow points its
  collective saves (TensorBoard would show it as a run)."""
  scratch = config.cluster.scratch_dir(config.model_dir)
  if not config.cluster.is_chief and tf.io.gfile.exists(scratch):
    tf.io.gfile.rmtree(scratch)


def _cluster_role(config):
  """Sets up TF_CONFIG for TensorFlow; returns this task's type or None."""
  if config.cluster is None:
    return None
  os.environ['TF_CONFIG'] = config.cluster.tf_config()
  logging.info('Cluster task %s:%d of %s', config.cluster.task_type,
               config.cluster.task_index, config.cluster.jobs)
  return config.cluster.task_type


def train_and_evaluate(config):
  """Trains, evaluates on the whole test set; returns metrics.json's dict.

  In a TF_CONFIG cluster the task type decides: chief and workers train, ps
  tasks serve variables until training ends, the evaluator evaluates every
  new checkpoint and writes metrics.json (the chief does, at the end, when
  there is no evaluator). Returns None on tasks that write no metrics.
  """
  role = _cluster_role(config)
  if role == cluster_lib.PS:
    return _serve_parameters(config)
  if role == cluster_lib.EVALUATOR:
    return _evaluate_until_trained(config)

  hooks = []
  if role:
    # Before the strategy exists: creating it may already wait for peers.
    watchdog = _watchdog(config, 'training step')
    hooks.append(WatchdogHook(watchdog))
  job = _Job(config)
  hooks += job.train_hooks()
  if role and config.cluster.is_chief:
    _write_train_spec(job)
  # Only a lone process stops on SIGTERM: a cluster's tasks would have to
  # stop together.
  run = (faults.train_and_evaluate if role is None else
         tf.estimator.train_and_evaluate)
  result = run(
      job.estimator,
      tf.estimator.TrainSpec(job.input_fn, max_steps=job.max_steps,
                             hooks=hooks),
      tf.estimator.EvalSpec(job.input_fn, steps=None, start_delay_secs=0,
                            throttle_secs=config.throttle_secs,
                            exporters=_exporters(config)))
  if role is None:  # None when preempted: not trained, nothing to report.
    return None if result is None else job.write_metrics(result[0])
  watchdog.stop()
  _remove_scratch_dir(config)
  _mark_finished(job)
  if config.cluster.is_chief and not config.cluster.has_evaluator:
    job = _eval_job(config)
    checkpoint = tf.train.latest_checkpoint(config.model_dir)
    result = job.estimator.evaluate(job.input_fn, checkpoint_path=checkpoint)
    _export(job, _exporters(config), checkpoint, result, is_final=True)
    return job.write_metrics(result)
  return None


def _exporters(config):
  return export_lib.make_exporters(config.export, config.keep_checkpoint_max)


def _export(job, exporters, checkpoint, eval_result, is_final):
  """Runs exporters after an evaluation, as EvalSpec does in local training."""
  for exporter in exporters:
    exporter.export(job.estimator,
                    layout.export_dir(job.config.model_dir, exporter.name),
                    checkpoint, eval_result, is_final)


def train(config):
  """Trains to the configured step count; returns the latest checkpoint's
  global step. (Clusters train through train_and_evaluate: config.py.)"""
  job = _Job(config)
  faults.train(job.estimator, job.input_fn, job.max_steps, job.train_hooks())
  return _checkpoint_step(config.model_dir)


def _require_checkpoint(config):
  if not tf.train.latest_checkpoint(config.model_dir):
    raise TrainerError(f'no checkpoint in {config.model_dir}; train first')


def evaluate(config):
  """Evaluates the latest checkpoint on the whole test set."""
  _require_checkpoint(config)
  job = _eval_job(config)
  return job.write_metrics(job.estimator.evaluate(job.input_fn, steps=None))


def predict(config):
  """Writes predictions for the first `num_predictions` test images."""
  _require_checkpoint(config)
  job = _eval_job(config)
  predictions = itertools.islice(job.estimator.predict(job.input_fn),
                                 config.num_predictions)
  path = config.resolved_predictions_file
  count = outputs.write_predictions(path, predictions)
  logging.info('Wrote %d predictions to %s', count, path)
  return path


def export(config):
  """Writes a SavedModel of the latest checkpoint; returns its directory."""
  _require_checkpoint(config)
  job = _eval_job(config)
  return export_lib.export_latest_checkpoint(job.estimator, config.model_dir)


def trainer_fn(trainer_fn_args, schema=None):
  """TFX Trainer module function (Estimator flavour).

  Reads `train_files`, `eval_files` (lists of TFRecord globs of our
  tf.Example), `serving_model_dir` (used as model_dir, as in TFX's examples),
  `train_steps` and `eval_steps` from `trainer_fn_args`; `schema` is not
  needed (the example format is fixed). Returns `estimator`, `train_spec` and
  `eval_spec` for `tf.estimator.train_and_evaluate`, with a final exporter,
  and TFMA's `eval_input_receiver_fn` (needs the `tfx` extra).
  """
  del schema
  args = trainer_fn_args
  config = TrainConfig(
      model_dir=args.serving_model_dir,
      train_files=','.join(args.train_files),
      eval_files=','.join(args.eval_files),
      train_steps=args.train_steps, export='final')
  # TFMA exports the eval graph; images rendered in Python cannot be in it.
  job = _Job(config, eval_images=False)
  return {
      'estimator': job.estimator,
      'train_spec': tf.estimator.TrainSpec(job.input_fn,
                                           max_steps=job.max_steps,
                                           hooks=job.train_hooks()),
      'eval_spec': tf.estimator.EvalSpec(
          job.input_fn, steps=getattr(args, 'eval_steps', None),
          exporters=_exporters(config), start_delay_secs=0,
          throttle_secs=config.throttle_secs),
      'eval_input_receiver_fn': export_lib.eval_input_receiver_fn,
  }
