"""What TensorBoard's HParams plugin compares runs by: each run's settings,
their experiment config (the table's columns) and the final metrics."""

import dataclasses
import os

import tensorflow as tf

from estimator_trainer import config_resolved
from estimator_trainer import layout
from estimator_trainer import models
from estimator_trainer.summaries import RUN_RATE

# The HParams plugin's table: final metrics by (run relative to model_dir, tag).
_METRICS = (
    (layout.EVAL_DIR, 'accuracy', 'eval accuracy'),
    (layout.EVAL_DIR, 'average_loss', 'eval loss'),
    ('', 'loss', 'train loss'),
    ('', RUN_RATE, 'examples/s'),
)
# The plugin shows five columns at first: those whose config says they
# differ, then the others, each by name. What a run's row is compared by
# (its settings given away from their defaults are added), and, while
# fewer than five are, what it is of.
_COMPARED = ('run', 'model', 'learning_rate', 'train_steps')
_FILLER = 'dataset'
_SHOWN = 5


def run_hparams(config, spec, num_replicas, global_batch_size, train_steps):
  """What the HParams plugin compares runs by (`spec`: the DatasetSpec).

  The plugin makes one row of the runs whose values are all equal and
  averages their metrics: the run's model_dir makes every run its own row
  (a resumed one too: the same directory), and the data's name, its head
  and the model say what each row is of."""
  return {
      'run': (config.model_dir if '://' in config.model_dir
              else os.path.abspath(config.model_dir)),
      'engine': config.engine,
      'model': models.name_of(config.model),
      'dataset': spec.name,
      'head': spec.head or 'multiclass',
      'strategy': config.strategy,
      'replicas': num_replicas,
      'global_batch_size': global_batch_size,
      'optimizer': config.optimizer,
      'learning_rate': config.learning_rate,
      # HParams takes no None: each off control as its value of no effect
      # (a clip at norm 0: none; an average of decay 0: the weights).
      'linear_optimizer': config.linear_optimizer or 'none',
      'linear_learning_rate': (config.linear_learning_rate or
                               config.learning_rate),
      'lr_decay': config.lr_decay,
      'weight_decay': config_resolved.weight_decay_of(config, spec),
      'label_smoothing': config_resolved.label_smoothing_of(
          config.label_smoothing, images=not spec.head),
      'clip_global_norm': config.clip_global_norm or 0.0,
      'accumulate_steps': config.accumulate_steps,
      'ema_decay': config.ema_decay or 0.0,
      'precision': config.precision,
      'train_steps': train_steps,
      'seed': config.seed,
  }


def compared(config, hparams):
  """The names of `hparams` (run_hparams') that the table shows at first:
  _COMPARED, the settings `config` gives away from their defaults, and
  _FILLER while fewer than the plugin's five."""
  names = set(_COMPARED) | {
      field.name for field in dataclasses.fields(config)
      if field.name in hparams and getattr(config, field.name) != field.default}
  return names | {_FILLER} if len(names) < _SHOWN else names


def hparams_summaries(hparams, shown):
  """Serialized Summary protos recording a run's hyperparameters for
  TensorBoard's HParams plugin, to write with the run's training events;
  its row is named by the run's model_dir (`<name> in <parent>`), its
  columns `shown` (compared's) are shown at first.

  With the experiment config in every run, runs under one parent directory
  share one table, whichever TensorBoard finds first: their columns shown
  at first are that run's.
  """
  # pylint: disable=g-import-not-at-top
  from tensorboard.plugins.hparams import api as hp
  from tensorboard.plugins.hparams import plugin_data_pb2
  config = hp.hparams_config_pb(
      hparams=[hp.HParam(name) for name in hparams],
      metrics=[hp.Metric(tag, group=group, display_name=display)
               for group, tag, display in _METRICS])
  # hp.HParam has no `differs`, which the plugin orders the columns by.
  metadata = config.value[0].metadata.plugin_data
  data = plugin_data_pb2.HParamsPluginData.FromString(metadata.content)
  for info in data.experiment.hparam_infos:
    info.differs = info.name in shown
  metadata.content = data.SerializeToString()
  # The row's name: the run's directory first (the page cuts long names),
  # then where it is (rows of one name would be one, their metrics averaged).
  run = hparams['run']
  name = f'{os.path.basename(run)} in {os.path.dirname(run)}'
  return [config.SerializeToString(),
          hp.hparams_pb(hparams, trial_id=name).SerializeToString()]


class HParamsHook(tf.compat.v1.train.SessionRunHook):
  """Writes the run's hyperparameters with Estimator's training events (its
  graph's FileWriter for model_dir: one events file)."""

  def __init__(self, model_dir, hparams, shown):
    self._model_dir = model_dir
    self._hparams = hparams
    self._shown = shown

  def begin(self):
    writer = tf.compat.v1.summary.FileWriterCache.get(self._model_dir)
    for summary in hparams_summaries(self._hparams, self._shown):
      writer.add_summary(tf.compat.v1.Summary.FromString(summary))
