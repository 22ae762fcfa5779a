import dataclasses
import importlib
import json

from absl import flags
import pytest

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import config_flags
from estimator_trainer import config_resolved
from estimator_trainer import engines
from estimator_trainer import flag_data
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
import engine_params


def test_defaults_resolve_to_64_per_replica_and_10_epochs():
  config = TrainConfig(model_dir='/tmp/x')
  assert config.resolve_global_batch_size(1) == 64
  assert config.resolve_global_batch_size(4) == 256
  assert config.resolve_train_steps(60000, 64) == 9375


def test_structured_data_has_its_own_recipe_and_images_keep_theirs():
  """Issue 45: structured data's default model and length (10 epochs of a
  few hundred rows were 30 to 70 steps); the image defaults unchanged."""
  images = TrainConfig(model_dir='/tmp/x')
  assert (images.model, images.structured) == ('cnn', False)
  assert images.resolve_train_steps(426, 64) == 67
  for files in ({'train_files': 'a.csv', 'eval_files': 'b.csv'},
                {'train_files': 'a-*.tfrecord', 'eval_files': 'b.tfrecord',
                 'feature_spec': 's.json'}):
    config = TrainConfig(model_dir='/tmp/x', **files)
    assert (config.model, config.structured) == ('linear', True)
    # Issue 72: the linear model's floor brings creditcard's log loss within
    # 2 % of LogisticRegression's (test_tabular_quality).
    assert config.resolve_train_steps(426, 64) == 4000
    assert config.resolve_train_steps(60000, 64) == 9375  # 10 epochs.
    assert TrainConfig(model_dir='/tmp/x', model='dnn', **files
                       ).resolve_train_steps(426, 64) == 2000
    assert TrainConfig(model_dir='/tmp/x', train_epochs=10, **files
                       ).resolve_train_steps(426, 64) == 67
    assert TrainConfig(model_dir='/tmp/x', model='dnn', **files).model == 'dnn'
  # Structured training files without evaluation files hold out a fifth.
  assert TrainConfig(model_dir='/tmp/x', train_files='a.csv'
                     ).eval_fraction == 0.2
  assert TrainConfig(model_dir='/tmp/x', train_files='a.csv',
                     eval_fraction=0.1).eval_fraction == 0.1
  assert TrainConfig(model_dir='/tmp/x', train_files='a.csv',
                     eval_files='b.csv').eval_fraction is None
  # TFRecords without a spec are images (their dataset_spec.json).
  assert not TrainConfig(model_dir='/tmp/x', train_files='a.tfrecord',
                         eval_files='b.tfrecord').structured


def test_the_structured_linear_models_rate_and_l2_are_logistic_regressions():
  """Issue 45, item 3: structured data's default linear model trains at
  rate 0.05 (issue 72, item 2: 0.01 fell short of the fit) with
  LogisticRegression's (Ridge's) prior L2 from the data spec; `dnn` and
  `wide_deep` at 2e-3 with the spec's deep L2 (issue 72, item 3); a
  user's model, and images, at 2e-3 without L2; a given flag wins."""
  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular.dataset import TabularDataSpec
  spec = TabularDataSpec('t', 'binary', ('0', '1'), {},
                         prior_weight_decay=1e-3, deep_weight_decay=1e-2)
  linear = TrainConfig(model_dir='/tmp/x', train_files='a.csv')
  assert (linear.model, linear.learning_rate) == ('linear', 0.05)
  assert config_resolved.weight_decay_of(linear, spec) == 1e-3
  for model in ('dnn', 'wide_deep'):
    deep = TrainConfig(model_dir='/tmp/x', train_files='a.csv', model=model)
    assert deep.learning_rate == 2e-3
    assert config_resolved.weight_decay_of(deep, spec) == 1e-2
  for other in (TrainConfig(model_dir='/tmp/x', train_files='a.csv',
                            model='mine:build'), TrainConfig(model_dir='/tmp/x')):
    assert other.learning_rate == 2e-3
    assert config_resolved.weight_decay_of(other, spec) == 0.0
  for model in ('linear', 'dnn'):
    given = TrainConfig(model_dir='/tmp/x', train_files='a.csv', model=model,
                        learning_rate=0.5, weight_decay=0.0)
    assert given.learning_rate == 0.5
    assert config_resolved.weight_decay_of(given, spec) == 0.0


def test_global_batch_must_divide_by_replicas():
  config = TrainConfig(model_dir='/tmp/x', global_batch_size=100)
  assert config.resolve_global_batch_size(4) == 100
  with pytest.raises(UsageError, match='does not divide by the 3 replicas'):
    config.resolve_global_batch_size(3)


def test_epochs_round_up_to_whole_steps():
  config = TrainConfig(model_dir='/tmp/x', train_epochs=1)
  assert config.resolve_train_steps(10000, 64) == 157
  assert TrainConfig(model_dir='/tmp/x', train_steps=7).resolve_train_steps(
      10000, 64) == 7


@pytest.mark.parametrize('kwargs, message', [
    (dict(strategy='horovod'), '--strategy must be one of'),
    (dict(eval_strategy='x'), '--eval_strategy must be one of'),
    (dict(image_size='32'), '--image_size must be 2 positive integers'),
    (dict(image_shape='32,32,0'), '--image_shape must be 3 positive'),
    (dict(num_classes=1), '--num_classes must be > 1'),
    (dict(model_kwargs='[1]'), '--model_kwargs must be a JSON object'),
    (dict(model_kwargs='{'), '--model_kwargs: not JSON'),
    (dict(augment='mixup'), '--augment must be one of'),
    (dict(mode='serve'), '--mode must be one of'),
    (dict(optimizer='rmsprop'), '--optimizer must be one of'),
    # Each optimizer's parameters: its own, in their bounds.
    (dict(optimizer='adam', optimizer_kwargs='{"momentum": 0.9}'),
     "^--optimizer_kwargs: adam takes beta_1, beta_2, epsilon, not "
     "'momentum'$"),
    (dict(optimizer='sgd', optimizer_kwargs='{"momentum": 1.5}'),
     r'^--optimizer_kwargs: momentum must be in \[0, 1\], got 1.5$'),
    (dict(optimizer='sgd', optimizer_kwargs='{"nesterov": 1}'),
     '^--optimizer_kwargs: nesterov must be true or false, got 1$'),
    (dict(optimizer='ftrl',
          optimizer_kwargs='{"l1_regularization_strength": -1}'),
     r'l1_regularization_strength must be in \[0, inf\], got -1$'),
    (dict(optimizer_kwargs='[1]'), '--optimizer_kwargs must be a JSON object'),
    (dict(linear_optimizer_kwargs='{"beta": 0.1}'),
     '^--linear_optimizer_kwargs needs --linear_optimizer$'),
    (dict(communication='mpi'), '--communication must be one of'),
    (dict(batch_size_per_replica=0), '--batch_size_per_replica must be > 0'),
    (dict(global_batch_size=-8), '--global_batch_size must be > 0'),
    (dict(batch_size_per_replica=32, global_batch_size=64), 'not both'),
    (dict(train_steps=0), '--train_steps must be > 0'),
    (dict(train_epochs=-1.0), '--train_epochs must be > 0'),
    (dict(train_steps=10, train_epochs=1.0), 'not both'),
    (dict(learning_rate=0.0), '--learning_rate must be > 0'),
    (dict(shuffle_buffer=-1), '--shuffle_buffer must be >= 0'),
    (dict(intra_op_threads=-1), '--intra_op_threads must be >= 0'),
    (dict(inter_op_threads=-2), '--inter_op_threads must be >= 0'),
    (dict(exports_to_keep=0), '--exports_to_keep must be > 0'),
    (dict(idx_dir='/nonexistent'), 'is not a directory'),
    (dict(data_source='idx'), 'needs --idx_dir'),
    (dict(model_dir=''), '--model_dir must be given'),
    # Only structured data holds out an evaluation split (issue 45).
    (dict(train_files='a.tfrecord'), r'give both --train_files and '
     r'--eval_files \(images; structured data can hold out'),
    (dict(eval_files='a.csv'), '^--eval_files needs --train_files$'),
    (dict(skip_rows_without_label=True),
     r'^--skip_rows_without_label is for structured data'),
    (dict(unreadable_as_missing=True),
     r'^--unreadable_as_missing is for structured data'),
    *((dict(train_files=train, eval_fraction=fraction, **more),
       f'^--eval_fraction={fraction}: a fraction below 1 of structured '
       'training files, for runs without --eval_files$')
      for train, fraction, more in (
          ('a.csv', 0.1, {'eval_files': 'b.csv'}), ('a.csv', 1.0, {}),
          ('a.tfrecord', 0.1, {'eval_files': 'b.tfrecord'}))),
    (dict(train_files='a.csv', eval_fraction=0.0),
     '--eval_fraction must be > 0'),
    # Image flags structured data does not read.
    *((dict(feature_spec='s.json', train_files='t', eval_files='e',
            model='dnn', **{name: value}),
       f"^--{name} is for images; this run's data is structured "
       r'\(--feature_spec\)$')
      for name, value in (('augment', 'crop_flip'), ('image_size', '32,32'),
                          ('image_key', 'x'), ('label_key', 'y'),
                          ('image_shape', '2,2,1'), ('num_classes', 3))),
])
def test_bad_values_are_usage_errors(kwargs, message):
  kwargs = {'model_dir': '/tmp/x', **kwargs}
  with pytest.raises(UsageError, match=message):
    TrainConfig(**kwargs)


def _cluster(jobs, task_type='chief'):
  return cluster_lib.parse(json.dumps(
      {'cluster': jobs, 'task': {'type': task_type, 'index': 0}}))


@pytest.mark.parametrize('kwargs, message', [
    (dict(engine='keras', eval_strategy='mirrored'),
     r'^--eval_strategy: --engine=keras evaluates under the training '
     r'--strategy$'),
    (dict(engine='ctl', strategy='multi_worker_mirrored',
          early_stopping_evals=3,
          cluster=_cluster({'chief': ['h:1'], 'worker': ['h:2'],
                            'evaluator': ['h:3']})),
     r'^--early_stopping_evals: --engine=ctl stops on its own evaluations, '
     r'which an evaluator task takes over'),
])
def test_what_a_tf2_engine_cannot_match_is_a_usage_error(kwargs, message):
  with pytest.raises(UsageError, match=message):
    TrainConfig(model_dir='/tmp/x', **kwargs)


@pytest.mark.parametrize('name', engine_params.ENGINES)
def test_each_engine_has_a_function_for_every_mode(name):
  module = importlib.import_module(engines.ENGINES[name].module)
  for mode in engines.MODES:
    assert callable(getattr(module, mode)), (name, mode)


def test_tf_config_is_read_only_by_from_environment(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps(
      {'cluster': {'chief': ['h:1'], 'worker': ['h:2']},
       'task': {'type': 'worker', 'index': 0}}))
  assert TrainConfig(model_dir='/tmp/x').cluster is None
  config = TrainConfig.from_environment(model_dir='/tmp/x',
                                        strategy='multi_worker_mirrored')
  assert (config.cluster.task_type, config.cluster.task_index) == ('worker', 0)


def test_flags_come_from_the_config_fields():
  flag_values = flags.FlagValues()
  config_flags.define_flags(flag_values)
  flag_values(['prog', '--learning_rate=0.01', '--train_steps=5'])
  config = config_flags.config_from_flags(flag_values)
  assert (config.learning_rate, config.train_steps) == (0.01, 5)
  for field in dataclasses.fields(TrainConfig):
    if field.name in ('model_dir', 'cluster'):
      continue
    assert flag_values[field.name].default == field.default, field.name
    assert field.metadata['help'] in flag_values[field.name].help
    for choice in field.metadata['choices'] or ():
      assert choice in flag_values[field.name].help
  assert flag_values['model_dir'].default == TrainConfig.__dataclass_fields__[
      'model_dir'].metadata['flag_default']


def test_every_flags_help_says_which_data_it_applies_to():
  """Issue 47, item 1: --help was about images only. Each flag field is
  placed in exactly one group, so that a new one cannot go unlabelled."""
  flag_fields = [field.name for field in dataclasses.fields(TrainConfig)
                 if 'help' in field.metadata]
  groups = flag_data.IMAGES + flag_data.STRUCTURED + flag_data.BOTH
  assert sorted(groups) == sorted(flag_fields)
  flag_values = flags.FlagValues()
  config_flags.define_flags(flag_values)
  for name in flag_data.IMAGES:
    assert flag_values[name].help.startswith('[images] '), name
  for name in flag_data.STRUCTURED:
    assert flag_values[name].help.startswith('[structured data] '), name
  for name in flag_data.BOTH:
    assert flag_values[name].help.startswith(
        '[images, structured data] '), name


@pytest.mark.parametrize('kwargs, said', [
    (dict(optimizer='ftrl'), True),
    (dict(model='wide_deep', linear_optimizer='ftrl'), True),
    (dict(optimizer='ftrl', lr_decay='none'), False),
    (dict(), False),
])
def test_the_config_line_says_ftrl_keeps_its_rate(kwargs, said):
  """--lr_decay=cosine decays every optimizer's rate but FTRL's
  (optimizers.py): the Config line says so where it applies."""
  line = TrainConfig(model_dir='/tmp/x', **kwargs).describe('m', 'd', 1, 64)
  assert line.endswith('; ftrl keeps a constant rate, as canned Estimators '
                       'do') == said, line


def test_the_config_line_names_the_feature_spec(tmp_path):
  """Every setting not at its default is on the Config line: a run's
  --feature_spec was not (issue 75, item 3)."""
  data = tmp_path / 'd.csv'
  data.write_text('a,y\n1,0\n')
  line = TrainConfig(model_dir='/tmp/x', train_files=str(data),
                     feature_spec='spec.json').describe('linear', 'd', 1, 64)
  assert "feature_spec='spec.json'" in line, line


def test_the_config_line_leaves_out_the_rate_a_run_left_to_its_model(
    tmp_path):
  """A run that gives no --learning_rate had `learning_rate=0.002` (images,
  dnn) or `0.05` (structured linear) on its Config line, as if given: the
  rate is filled in on construction, so it never equalled the field's
  default (None). A given rate, even the default's value on another model,
  is a setting."""
  data = tmp_path / 'd.csv'
  data.write_text('a,y\n1,0\n')

  def line(**kwargs):
    return TrainConfig(model_dir='/tmp/x', **kwargs).describe('m', 'd', 1, 64)

  assert 'learning_rate' not in line()
  assert 'learning_rate' not in line(train_files=str(data))
  assert 'learning_rate' not in line(train_files=str(data), model='dnn')
  assert 'learning_rate=0.05' in line(learning_rate=0.05)
  assert 'learning_rate=0.002' in line(train_files=str(data),
                                       learning_rate=0.002)
