"""What every mode of the Estimator engine sets up: the RunConfig, the data,
the Estimator on model_fn, its hooks and exporters."""

import dataclasses

import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import data
from estimator_trainer import export as export_lib
from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer import listen
from estimator_trainer import models
from estimator_trainer import outputs
from estimator_trainer import progress
from estimator_trainer import sources
from estimator_trainer import summaries
from estimator_trainer.estimator import early_stopping_hook
from estimator_trainer.estimator.graph import make_model_fn
from estimator_trainer.estimator.params import model_params
from estimator_trainer.strategy import make_strategy, num_replicas


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


class Job:
  """What every mode shares: run config, data, input_fn and Estimator."""

  def __init__(self, config, training=True, eval_images=True):
    self.config = config
    outputs.require_writable_dir(config.model_dir)
    self.run_config = make_run_config(config)
    self.global_batch_size = config.resolve_global_batch_size(
        num_replicas(self.run_config.train_distribute))
    self.source, self.max_steps, self.input_fn = data.prepare(
        config, self.global_batch_size, training)
    spec = self.source.spec
    models.check(config.model, spec.image_shape, spec.num_classes,
                 config.model_kwargs, config.precision, config.sync_batch_norm)
    self.example_format = sources.example_format(config, spec)
    warm_start = None
    if config.warm_start_from:
      warm_start = tf.estimator.WarmStartSettings(
          config.warm_start_from, vars_to_warm_start=config.warm_start_vars)
    params = dict(model_params(config, self.global_batch_size,
                               self.max_steps, spec), eval_images=eval_images)
    model_fn = make_model_fn(config.model, **(config.model_kwargs or {}))
    checkpoints.check_compatible(config.model_dir, model_fn, params, training,
                                 spec.image_shape, config.model)
    if training and self.is_chief:
      checkpoints.record_model(config.model_dir, config, spec)
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
          progress.Progress(self.max_steps, self.global_batch_size)))
    if self.config.early_stopping_evals:
      hooks.append(early_stopping_hook.make_hook(
          self.estimator, self.config.early_stopping_evals))
    return hooks

  def hparams(self):
    return summaries.run_hparams(self.config, self.source.spec,
                                 self.num_replicas,
                                 self.global_batch_size, self.max_steps)

  def write_metrics(self, eval_result):
    return outputs.write_eval_metrics(self.config.model_dir, eval_result)



def eval_job(config):
  """A job that only evaluates or predicts, on this task's own devices.

  Without TF_CONFIG: with it, RunConfig would point the evaluation session
  at the cluster's master and filter its devices.
  """
  config = dataclasses.replace(config, strategy='default', cluster=None)
  with cluster_lib.tf_config_environment(None):
    return Job(config, training=False)


def exporters(job):
  return export_lib.make_exporters(job.config.export, job.example_format,
                                   job.config.keep_checkpoint_max)


def export(job, job_exporters, checkpoint, eval_result, is_final):
  """Runs exporters after an evaluation, as EvalSpec does in local training."""
  for exporter in job_exporters:
    exporter.export(job.estimator,
                    layout.export_dir(job.config.model_dir, exporter.name),
                    checkpoint, eval_result, is_final)

