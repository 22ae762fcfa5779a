"""What every mode of the Estimator engine sets up: the RunConfig, the data,
the Estimator on model_fn, its hooks and exporters."""

import dataclasses
import logging
import os
import re

import tensorflow as tf

from estimator_trainer import batch_norm
from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import data
from estimator_trainer import early_stopping
from estimator_trainer import export as export_lib
from estimator_trainer import faults
from estimator_trainer import heads
from estimator_trainer import hparams as hparams_lib
from estimator_trainer import layout
from estimator_trainer import listen
from estimator_trainer import model_recipe
from estimator_trainer import models
from estimator_trainer import outputs
from estimator_trainer import progress as progress_lib
from estimator_trainer import run_log
from estimator_trainer import weights
from estimator_trainer.estimator import batch_norm_hooks
from estimator_trainer.estimator import early_stopping_hook
from estimator_trainer.estimator import train_loop
from estimator_trainer.estimator.graph import make_model_fn
from estimator_trainer.estimator.params import model_params
from estimator_trainer.strategy import make_strategy, num_replicas
from estimator_trainer.models import tabular as tabular_models
from estimator_trainer.tabular import warm_start as tabular_warm_start
from estimator_trainer.errors import UsageError

_logger = logging.getLogger(__name__)


def check_engine(config, what):
  """`what` (an entry point of Estimator's) refuses, in one line, a config
  of another engine: it would run Estimator whatever config.engine says."""
  if config.engine != 'estimator':
    raise UsageError(
        f'{what} is the estimator engine\'s (tf.estimator): a TrainConfig of '
        f'engine={config.engine!r} runs with estimator_trainer.'
        'train_and_evaluate (or give engine=\'estimator\')')


def make_run_config(config):
  """A RunConfig with `train_distribute`/`eval_distribute` from `config`."""
  check_engine(config, 'make_run_config')
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


# Where the train op can loop over several steps: MirroredStrategy (and so
# multi_worker_mirrored) runs model_fn in a thread per replica, whose
# all-reduce (merge_call) cannot be inside a loop that model_fn builds.
_LOOPING_STRATEGIES = ('default', 'one_device')


def steps_per_run(config):
  """Training steps per session.run: --steps_per_loop where the strategy
  allows, 1 elsewhere (logged)."""
  if config.steps_per_loop == 1 or config.strategy in _LOOPING_STRATEGIES:
    return config.steps_per_loop
  _logger.info('One training step per session.run under --strategy=%s '
               '(--steps_per_loop=%d needs %s)', config.strategy,
               config.steps_per_loop, ' or '.join(_LOOPING_STRATEGIES))
  return 1


def _without_step_hooks(run_config):
  """`run_config` without Estimator's summary and step-rate hooks, which
  assume one step per session.run: TrainLoopHook writes what they wrote."""
  # In a cluster (Estimator's distribute coordinator), MonitoredTrainingSession
  # adds its CheckpointSaverHook only when summaries are on (TF 2.15,
  # _create_monitored_session_with_worker_context): they stay on there, at
  # a cadence that never comes after their first step.
  return run_config.replace(
      save_summary_steps=_NEVER if run_config.cluster_spec else 0,
      log_step_count_steps=None)


_NEVER = 2**62  # Steps.


class Job:
  """What every mode shares: run config, data, input_fn and Estimator."""

  def __init__(self, config, training=True, eval_images=True):
    config = self.config = model_recipe.resolved(config)
    outputs.require_writable_dir(config.model_dir)
    self.run_config = _without_step_hooks(make_run_config(config))
    self.global_batch_size = config.resolve_global_batch_size(
        num_replicas(self.run_config.train_distribute))
    self.steps_per_run = steps_per_run(config) if training else 1
    # Checkpoints and what follows them, left out of the step rates.
    self.save_clock = train_loop.SaveClock()
    self.validator = None  # --validation_fraction's (specs).
    self.source, self.max_steps, self.input_fn = data.prepare(
        config, self.global_batch_size, training)
    spec = self.source.spec
    run_log.log_config(config, self.source, self.num_replicas,
                       self.global_batch_size, self.max_steps, training)
    self.head = heads.of_data(spec, config.head, config.label_smoothing,
                              config.huber_delta)
    names = models.check(
        config.model, spec.model_input, self.head.logits_dimension,
        config.model_kwargs, config.precision, config.sync_batch_norm,
        inspect=config.linear_optimizer and tabular_models.linear_part)
    self.example_format = self.source.serving
    params = dict(model_params(config, self.global_batch_size,
                               self.max_steps, spec), eval_images=eval_images,
                  steps_per_run=self.steps_per_run)
    model_fn = make_model_fn(config.model, **(config.model_kwargs or {}))
    checkpoints.check_compatible(config.model_dir, model_fn, params, training,
                                 spec.model_input, config.model)
    if training and self.is_chief:
      self.source.persist(config.model_dir)
      checkpoints.record_model(config.model_dir, config, spec, self.max_steps)
    warm_start = None
    if training and config.warm_start_from:
      warm_start = _warm_start(config, self.source, names,
                               self.head.logits_dimension)
    self.estimator = tf.estimator.Estimator(
        model_fn, config=self.run_config, warm_start_from=warm_start,
        params=params)

  @property
  def is_chief(self):
    return self.config.cluster is None or self.config.cluster.is_chief

  @property
  def num_replicas(self):
    return num_replicas(self.run_config.train_distribute)

  def train_hooks(self, evaluates=False):
    """The training hooks; with early stopping, one that follows the
    evaluations of other tasks unless this one `evaluates` (the exporter
    of early_stopping_hook.after_evaluations stops it there)."""
    hooks = [faults.NonFiniteLossHook(self.config.model_dir)]
    if self.is_chief:  # Only the chief writes events and shows progress.
      # (Several steps per run need no strategy across processes, so they
      # run on a chief, whose TrainLoopHook plans them.)
      hparams = self.hparams()
      hooks.append(train_loop.TrainLoopHook(
          self.config, self.max_steps, self.global_batch_size,
          self.num_replicas, self.steps_per_run, self.save_clock,
          progress_lib.loss_name(hparams)))
      hooks.append(hparams_lib.HParamsHook(
          self.config.model_dir, hparams,
          hparams_lib.compared(self.config, hparams)))
    if self.config.early_stopping_evals and not evaluates:
      hooks.append(early_stopping_hook.make_hook(
          self.estimator, self.config.early_stopping_evals))
    return hooks

  def specs(self, hooks, alone=False, eval_steps=None):
    """TrainSpec and EvalSpec of a training job (with `hooks`); `alone`: of
    one process, which evaluates while it trains (train_and_evaluate
    without a cluster, TFX's Trainer); `eval_steps`: None, the whole
    evaluation split."""
    config = self.config
    hooks = [*hooks, *self.train_hooks(evaluates=alone)]
    job_exporters = exporters(self)
    if alone and config.early_stopping_evals:
      if config.validation_fraction:  # Final: the best (final_evaluation).
        self.validator = early_stopping_hook.Validator(
            config.model_dir, config.early_stopping_evals,
            self.source.validation().make_input_fn(config,
                                                   self.global_batch_size))
        job_exporters = [self.validator, *(
            job_exporters if config.export != 'final' else [])]
      hook, stop = early_stopping_hook.after_evaluations(
          config.early_stopping_evals,
          job_exporters if config.export == 'final' and not self.validator
          else [], self.validator)
      hooks.append(hook)
      job_exporters = [*job_exporters, stop]
    return (tf.estimator.TrainSpec(self.input_fn, max_steps=self.max_steps,
                                   hooks=hooks,
                                   saving_listeners=self.saving_listeners()),
            tf.estimator.EvalSpec(self.input_fn, steps=eval_steps,
                                  start_delay_secs=0,
                                  throttle_secs=config.throttle_secs,
                                  exporters=job_exporters))

  def saving_listeners(self):
    """Before each checkpoint save (on the chief, which saves): the time
    (first), the batch-norm statistics recomputed with
    --bn_recompute_batches, or else checked at the last step."""
    keys = models.FeatureKeys.of(self.source.spec.model_input)
    return [self.save_clock, batch_norm_hooks.StatisticsListener(
        lambda: self.input_fn(data.ModeKeys.TRAIN).map(
            lambda features, _: keys.inputs(features)),
        self.config.bn_recompute_batches or batch_norm.CHECK_BATCHES,
        bool(self.config.bn_recompute_batches), self.max_steps)]

  def hparams(self):
    return hparams_lib.run_hparams(self.config, self.source.spec,
                                 self.num_replicas,
                                 self.global_batch_size, self.max_steps)

  def write_metrics(self, eval_result):
    return outputs.write_eval_metrics(self.config.model_dir, eval_result)



def _warm_start(config, source, names, logits_dimension):
  """The WarmStartSettings of --warm_start_from; a table whose rows follow a
  changed vocabulary (tabular/warm_start.py) remapped by canned's
  VocabInfo, its ids as the tokens of its files in model_dir (a new value's
  row from its layer's initializer)."""
  remapping = tabular_warm_start.remapping(
      config.warm_start_from, source.statistics)
  tables = {}
  if remapping:
    with tf.Graph().as_default():  # As models.check named the weights.
      tables = remapping.tables(models.build(
          config.model, source.spec.model_input, logits_dimension,
          config.model_kwargs, precision=config.precision,
          sync_batch_norm=config.sync_batch_norm))
    tables = {i: table for i, table in tables.items()
              if re.match(config.warm_start_vars, f'{names[i]}:0')}
    _logger.info('Warm-starting from %s%s', config.warm_start_from,
                 weights.remapped_note(tables.values()))
  vocab_info = {}
  for i, table in tables.items():
    old, new = (layout.warm_start_vocabulary_file(config.model_dir, i, which)
                for which in ('old', 'new'))
    tf.io.gfile.makedirs(os.path.dirname(old))
    outputs.write_atomic(old, ''.join(
        f'{row}\n' for row in range(max(table.rows) + 1)))
    outputs.write_atomic(new, ''.join(
        f'{row}\n' if row >= 0 else f'new {index}\n'
        for index, row in enumerate(table.rows)))
    vocab_info[names[i]] = tf.estimator.VocabInfo(
        new, len(table.rows), num_oov_buckets=0, old_vocab=old,
        backup_initializer=table.initializer)
  return tf.estimator.WarmStartSettings(
      config.warm_start_from, vars_to_warm_start=config.warm_start_vars,
      var_name_to_vocab_info=vocab_info)


def eval_job(config):
  """A job that only evaluates or predicts, on this task's own devices.

  Without TF_CONFIG: with it, RunConfig would point the evaluation session
  at the cluster's master and filter its devices.
  """
  config = dataclasses.replace(config, strategy='default', cluster=None)
  with cluster_lib.tf_config_environment(None):
    return Job(config, training=False)


def exporters(job):
  return export_lib.make_exporters(job.config, job.example_format)


def export(job, job_exporters, checkpoint, eval_result, is_final):
  """Runs exporters after an evaluation, as EvalSpec does in local training."""
  for exporter in job_exporters:
    exporter.export(job.estimator,
                    layout.export_dir(job.config.model_dir, exporter.name),
                    checkpoint, eval_result, is_final)


def final_evaluation(job):
  """Evaluates and exports (as final) model_dir's latest checkpoint; returns
  the evaluation. With --validation_fraction, after training: its best
  step's, restored (early_stopping_hook.Validator)."""
  best = job.validator and job.validator.best
  checkpoint = (best.restore() if best else
                tf.train.latest_checkpoint(job.config.model_dir))
  result = job.estimator.evaluate(job.input_fn, checkpoint_path=checkpoint)
  export(job, exporters(job), checkpoint, {**result, **(
      {early_stopping.VALIDATION_SCORE: best.kept['score']} if best else {})},
         is_final=True)
  return result
