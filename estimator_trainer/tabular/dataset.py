"""Structured data as every engine's job reads it (data.prepare's twin): the
source, the model_dir's statistics, the head, the model's encoded inputs,
the input_fn and what serving needs."""

import dataclasses
import logging
from typing import Any, Dict, Optional, Tuple

from estimator_trainer import layout
from estimator_trainer import pipeline
from estimator_trainer import sources
from estimator_trainer.config import check_head_flags
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.sources import TEST, TRAIN
from estimator_trainer.tabular import infer
from estimator_trainer.tabular import input as input_lib
from estimator_trainer.tabular import priors
from estimator_trainer.tabular import rows
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import statistics as statistics_lib
from estimator_trainer.tabular.encoder import Encoder
# signature_key: documented here (docs/guide/export.md).
from estimator_trainer.tabular.serving import Serving
from estimator_trainer.tabular.serving import signature_key as signature_key  # pylint: disable=useless-import-alias
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular.statistics import storage
from estimator_trainer.tabular.statistics import training_files

_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TabularDataSpec:
  """What the engines need of structured data: the `head` (heads.KINDS),
  its `class_names` (classes, or multilabel's labels; () for regression),
  the encoded columns the model takes (`model_input`: name ->
  EncodedInput), a regression's `label_scale` (heads.RegressionHead's;
  None in model_dirs whose statistics predate it) and the
  `prior_weight_decay` of the linear model and the `deep_weight_decay` of
  `dnn` and `wide_deep` (config_resolved.weight_decay_of)."""

  name: str
  head: str
  class_names: Tuple[str, ...]
  model_input: Dict[str, Any]
  label_scale: Optional[Tuple[float, float]] = None
  prior_weight_decay: Optional[float] = None
  deep_weight_decay: Optional[float] = None

  def record(self):
    """What model_dir's record of the run keeps of the data."""
    return {'dataset': self.name, 'head': self.head,
            'class_names': list(self.class_names),
            'model_input': {name: dataclasses.asdict(value)
                            for name, value in self.model_input.items()},
            **({'label_scale': list(self.label_scale)}
               if self.label_scale else {})}


class TabularData(pipeline.RunData):
  """A source of structured data with its spec, statistics, serving and
  input_fn: the RunData an engine's job reads."""

  def __init__(self, source, spec, feature_spec, statistics, serving):
    self._source = source
    self._feature_spec = feature_spec
    self.spec = spec
    self.statistics = statistics
    self.serving = serving

  def __str__(self):
    return str(self._source)

  @property
  def feature_spec(self):
    return self._feature_spec

  def num_examples(self, split):
    return self._source.num_examples(split)

  def persist(self, model_dir, label_units=False):
    """Stores the statistics in model_dir (unless there already): when a
    training chief's checks have passed, so that bad input leaves nothing,
    and before the model's variables (whose creation under
    multi_worker_mirrored waits for the tasks that wait for this file).
    `label_units`: a regression's label scale stored as (0, 1), the model's
    outputs in the label's own units (a canned regressor's, carried)."""
    statistics = self.statistics
    if label_units:
      statistics = dataclasses.replace(statistics, label_scale=(0.0, 1.0))
    statistics_lib.store(model_dir, self._feature_spec, statistics,
                         training_files.of(self._source))

  def validation(self):
    """This data with --validation_fraction's part of the training
    records as its evaluation split (its statistics the training part's)."""
    return TabularData(self._source.validation(), self.spec,
                       self._feature_spec, self.statistics, self.serving)

  def make_input_fn(self, config, global_batch_size, seeded=True,
                    stage='encode'):
    return input_lib.make_input_fn(config, global_batch_size, self._source,
                                   self.statistics, seeded, stage=stage)


def _head(config, feature_spec):
  kind = input_lib.head(config, feature_spec)
  check_head_flags(config, kind)
  if (kind == 'multilabel') != isinstance(feature_spec.label, tuple):
    raise UsageError(
        f'--head={kind}: the feature spec\'s label must be '
        f'{"a list of 0/1 columns" if kind == "multilabel" else "one column"}'
        f', got {feature_spec.label!r}')
  return kind


def _inferred_spec(config):
  """The spec `infer` makes of the CSV training files (the label
  --label_key), its choices logged."""
  spec, lines = infer.infer(config.train_files, config.label_key,
                            head=config.head,
                            skip_unlabeled=config.skip_rows_without_label,
                            flags=('--label_key', None), key=config.key_column)
  _logger.info('No --feature_spec: the spec inferred from %s (label '
               '--label_key=%s), as `python -m estimator_trainer.tabular.'
               'infer` writes it:\n  %s', config.train_files,
               config.label_key, '\n  '.join(lines))
  return spec


def feature_spec_of(config, model_dir=None):
  """The feature spec of a run in `model_dir` (default: config's): the one
  stored there with its statistics, which its checkpoints were trained on;
  --feature_spec may name the same spec (a usage error naming the
  differences otherwise). Without a stored one (a new model_dir, or one of
  an earlier version), --feature_spec's, else the one inferred from CSV
  training files."""
  model_dir = model_dir or config.model_dir
  path = layout.stored_feature_spec(model_dir)
  if not config.feature_spec:
    return spec_lib.read(path) if path else _inferred_spec(config)
  given = spec_lib.read(config.feature_spec)
  if path is None:
    return given
  stored = spec_lib.read(path)
  changed = spec_lib.differences(stored, given)
  if changed:
    raise UsageError(
        f'--feature_spec={config.feature_spec} differs from {path}, the spec '
        f'of the statistics and checkpoints of {model_dir}: '
        f'{"; ".join(changed)}: drop the flag (the stored spec is used), or '
        'use another model_dir')
  _logger.info('Feature spec: %s (stored with the statistics)', path)
  return stored


def load(config, training=False) -> TabularData:
  """The structured data of `config` (its `feature_spec`, else the stored or
  inferred one), with the statistics of its model_dir: computed from the
  training split once, by the chief, and stored there when training starts
  (TabularData.persist). For `training`, the evaluation split's values are
  checked first too: a bad value fails before anything is written, naming
  it."""
  feature_spec = feature_spec_of(config)
  kind = _head(config, feature_spec)
  if config.key_column in feature_spec.names:
    raise UsageError(f'--key_column={config.key_column} is a column of the '
                     'feature spec: a key names rows, the model does not '
                     'read it; give another column')
  if config.predict_files:
    return _new_data(config, feature_spec, kind)
  source = TabularSource({TRAIN: config.train_files, TEST: config.eval_files},
                         feature_spec, head=kind,
                         eval_fraction=config.eval_fraction,
                         skip_unlabeled=config.skip_rows_without_label,
                         unreadable_as_missing=config.unreadable_as_missing,
                         key=config.key_column,
                         validation_fraction=config.validation_fraction,
                         cv_fold=config.cv_fold)
  if config.skip_rows_without_label:
    for split, files in ((TRAIN, config.train_files),
                         (TEST, config.eval_files)):
      if files:  # (A held-out split's files are the training ones.)
        _logger.info('--skip_rows_without_label: left out %d records '
                     'without a label in %s', source.unlabeled(split), files)
  _check_records(config, source, training)
  if training and config.validation_fraction and not (
      source.validation().num_examples(TEST)):
    raise UsageError(
        f'--validation_fraction={config.validation_fraction}: no records of '
        f'{config.train_files} fall in the validation part; give a larger '
        'fraction or more records')
  if training:  # Checks the values, in one streaming pass.
    scan.summarise(source, TEST, kind)
  cluster = config.cluster
  statistics = statistics_lib.load_or_compute(
      config.model_dir, feature_spec, source,
      is_chief=cluster is None or cluster.is_chief,
      timeout_secs=config.cluster_timeout_secs, head=kind, write=False,
      share=cluster and cluster.trainer_index is not None and (
          cluster.trainer_index, cluster.num_trainers))
  return _data(config, source, feature_spec, kind, statistics)


def _new_data(config, feature_spec, kind):
  """--predict_files: new records (with or without a label) read with the
  model_dir's stored spec and statistics alone, never the training files
  (which need not be there)."""
  path = layout.statistics_file(config.model_dir)
  if not layout.exists(path):
    raise UsageError(f'--predict_files needs the model_dir of a trained '
                     f'run: {config.model_dir} holds no {path}')
  try:
    sources.glob_files(config.predict_files)
  except DataError:
    raise UsageError(f'--predict_files={config.predict_files}: no files '
                     'match') from None
  source = TabularSource({TEST: config.predict_files}, feature_spec,
                         head=kind, labels=False, key=config.key_column,
                         unreadable_as_missing=config.unreadable_as_missing)
  _check_records(config, source, training=False)
  statistics = statistics_lib.read(path)
  storage.check_covers(statistics, feature_spec, path)
  _logger.info('Tabular statistics read from %s', path)
  return _data(config, source, feature_spec, kind, statistics)


def _data(config, source, feature_spec, kind, statistics):
  """The TabularData of `source` with its `statistics`."""
  encoder = Encoder(feature_spec, statistics)
  label_scale = statistics.label_scale if kind == 'regression' else None
  spec = TabularDataSpec(data_name(feature_spec, config.train_files), kind,
                         tuple(encoder.class_names(kind)), encoder.inputs,
                         label_scale,
                         priors.prior_weight_decay(statistics, label_scale),
                         priors.deep_weight_decay(statistics, label_scale))
  return TabularData(source, spec, feature_spec, statistics,
                     Serving(source, feature_spec, statistics, kind,
                             source.key and (source.key,
                                             rows.key_dtype(source))))


def _check_records(config, source, training):
  """DataError unless each split the run reads has records: a header-only
  file would give statistics of nothing, or metrics of zeros."""
  splits = [TEST] * (config.mode in ('train_and_evaluate', 'evaluate',
                                    'predict')) + [TRAIN] * training
  for split in splits:
    if not source.num_examples(split):
      held_out = (' in --cv_fold' if config.cv_fold else
                  ' held out by --eval_fraction' if split == TEST and not
                  config.eval_files else '')
      raise DataError(
          f'no {"training" if split == TRAIN else "evaluation"} records in '
          f'{", ".join(source.files(split))}{held_out}'
          f'{" with a label" * config.skip_rows_without_label}'
          f'{" (a header only)" * (source.is_csv and not source.filtered)}')


def data_name(feature_spec, train_files):
  """What the run record and HParams call the data: the spec's name, else
  (an inferred spec, or one that names nothing) the training files, so that
  runs on different tables are never taken for one."""
  if feature_spec.name != spec_lib.FeatureSpec.name:
    return feature_spec.name
  return train_files


def prepare(config, global_batch_size, training, seeded=True):
  """data.prepare of structured data: (data, training steps, input_fn)."""
  data = load(config, training)
  max_steps = config.resolve_train_steps(
      data.num_examples(TRAIN), global_batch_size) if training else None
  return data, max_steps, data.make_input_fn(config, global_batch_size,
                                             seeded)
