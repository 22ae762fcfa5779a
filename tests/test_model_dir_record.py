"""A model_dir remembers its run (model.json): evaluation, prediction, export
and resumed training there take the run's settings from it unless a flag
gives them, and a flag that disagrees with its checkpoints is a usage error;
the Config line says what a run does (issue 33, items 7 and 10)."""

import json
import logging
import os
import pathlib
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import config_checks
from estimator_trainer import engines
from estimator_trainer import examples
from estimator_trainer import layout
from estimator_trainer import run_record
from estimator_trainer import sources
from estimator_trainer import stack
from estimator_trainer.config import TrainConfig
from estimator_trainer.tabular import dataset
from estimator_trainer.errors import UsageError
import cli_config
import engine_params
import scripts_dir
import warm_process

# In one pytest-xdist worker: the module's trained model_dir is made once.
pytestmark = pytest.mark.xdist_group('model_dir_record')

TESTS = pathlib.Path(__file__).resolve().parent
NUM_EXAMPLES = 64  # Per split.
write_tfrecords = scripts_dir.load('write_tfrecords')


class _Brightness:
  """12x12 RGB images whose class is their brightness: 3 classes."""

  spec = sources.DatasetSpec('brightness', (12, 12, 3), 3)

  def dataset(self, split):
    rng = np.random.default_rng(0 if split == sources.TRAIN else 1)
    labels = rng.integers(0, 3, NUM_EXAMPLES)
    images = (labels[:, None, None, None] * 100 +
              rng.integers(0, 40, (NUM_EXAMPLES, 12, 12, 3))).astype(np.uint8)
    return tf.data.Dataset.from_tensor_slices((images, labels))


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """PNG TFRecords under TF-Slim's keys (not the defaults), a spec file."""
  directory = tmp_path_factory.mktemp('brightness')
  write_tfrecords.write(_Brightness(), str(directory), 2, examples.ExampleFormat(
      (12, 12, 3), 3, 'image/encoded', 'image/class/label'), encoding='png')
  return directory


# A builder of the tests' own: the command names it (a model_dir names no
# code to import).
OWN_MODEL = '--model=builders:mlp'


def _run_flags(data_dir):
  """A run none of whose data or model flags is the default."""
  return [f'--train_files={data_dir}/train-*',
          f'--eval_files={data_dir}/test-*', '--image_key=image/encoded',
          '--label_key=image/class/label', OWN_MODEL,
          '--model_kwargs={"hidden": 8}', '--batch_size_per_replica=16']


def _cli(*flags):
  """The command, a warm process (warm_process.py) run in the tests'
  directory, which `python -m` puts on sys.path for builders: a module
  found on PYTHONPATH by a cold CLI is test_bad_input.py's
  builder-wrong-logits-shape (REAL_CLI)."""
  return warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.run', *flags], 600,
      env={k: v for k, v in os.environ.items() if k != 'TF_CONFIG'},
      cwd=str(TESTS))


def _config_line(stderr):
  lines = [line for line in stderr.splitlines() if 'Config: ' in line]
  assert len(lines) == 1, stderr[-3000:]
  return lines[0].split('Config: ', 1)[1]


# Keras's record and modes are ctl's (run_record.py,
# controller.engine_modes); its resume through fit is test_engines.py's.
@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_evaluate_predict_export_and_resume_take_the_run_from_model_dir(
    tmp_path, data, engine):
  model_dir = tmp_path / 'model'
  config = cli_config.config_from([
      f'--model_dir={model_dir}', f'--engine={engine}', '--mode=train',
      '--train_steps=4', '--export=none', *_run_flags(data)])
  engines.ENGINES[engine].run(config)
  for mode in ('evaluate', 'predict', 'export'):
    config = cli_config.config_from([f'--model_dir={model_dir}',
                                     f'--mode={mode}', OWN_MODEL])
    assert (config.engine, config.model, config.model_kwargs,
            config.train_files, config.image_key, config.label_key) == (
                engine, 'builders:mlp', {'hidden': 8}, f'{data}/train-*',
                'image/encoded', 'image/class/label')
    engines.ENGINES[engine].run(config)
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert (metrics['global_step'], metrics['num_examples']) == (
      4, NUM_EXAMPLES)
  assert len((model_dir / 'predictions.jsonl').read_text().splitlines()) == 10
  assert list(model_dir.glob('export/manual/*/saved_model.pb'))
  # Resumed: the run's model and data, the steps and learning rate given.
  config = cli_config.config_from([f'--model_dir={model_dir}', '--mode=train',
                                   '--train_steps=6', '--learning_rate=0.01',
                                   OWN_MODEL])
  assert (config.engine, config.model, config.batch_size_per_replica) == (
      engine, 'builders:mlp', 16)
  engines.ENGINES[engine].run(config)
  assert layout.checkpoint_step(tf.train.latest_checkpoint(
      str(model_dir))) == 6
  run = json.loads((model_dir / 'model.json').read_text())['run']
  assert (run['train_steps'], run['learning_rate'], run['export']) == (
      6, 0.01, 'none')


def test_a_flag_given_wins_over_the_record(tmp_path, trained, data):
  """Other data (of the same shape) evaluates: the record's data source is
  then left whole; a flag given in a --config file counts as given."""
  config = cli_config.config_from([
      f'--model_dir={trained}', '--mode=evaluate', OWN_MODEL,
      f'--train_files={data}/test-*', f'--eval_files={data}/train-*'])
  assert (config.eval_files, config.model, config.image_key) == (
      f'{data}/train-*', 'builders:mlp', 'image/encoded')
  (tmp_path / 'flags.json').write_text('{"batch_size_per_replica": 8}')
  config = cli_config.config_from([f'--model_dir={trained}',
                                   '--mode=evaluate', OWN_MODEL,
                                   f'--config={tmp_path}/flags.json'])
  assert (config.batch_size_per_replica, config.model) == (8, 'builders:mlp')
  # The alternative of a recorded setting replaces it.
  config = cli_config.config_from([f'--model_dir={trained}',
                                   '--mode=evaluate', OWN_MODEL,
                                   '--global_batch_size=32'])
  assert (config.batch_size_per_replica, config.global_batch_size) == (
      None, 32)


def test_a_fresh_model_dir_and_the_python_api_ignore_any_record(tmp_path):
  """Training a model_dir without a checkpoint starts a run of its own; a
  TrainConfig built in code is what the code says."""
  model_dir = tmp_path / 'model'
  model_dir.mkdir()
  (model_dir / 'model.json').write_text(json.dumps(
      {'model': 'resnet20', 'run': {'model': 'resnet20'}}))
  assert cli_config.config_from([f'--model_dir={model_dir}']).model == 'cnn'
  assert cli_config.config_from([f'--model_dir={model_dir}',
                                 '--mode=evaluate']).model == 'resnet20'
  assert TrainConfig(model_dir=str(model_dir), mode='evaluate').model == 'cnn'


@pytest.mark.parametrize('mode', ['evaluate', 'export', 'predict', 'train'])
def test_a_model_dir_names_no_code_the_command_does_not(tmp_path, mode):
  """Issue 73, item 5: a prepared model.json naming MODULE:FUNCTION with
  arguments (subprocess.run of a shell command, its model_kwargs) runs
  nothing: the run stops at the record, in one line, before any import;
  the same builder named by the command is the user's to run."""
  model_dir = tmp_path / 'model'
  model_dir.mkdir()
  (model_dir / 'ckpt-1.index').write_text('')  # A run to resume.
  (model_dir / 'checkpoint').write_text('model_checkpoint_path: "ckpt-1"\n')
  run = {'model': 'subprocess:run', 'model_kwargs': {'args': 'touch pwned',
                                                     'shell': True}}
  (model_dir / 'model.json').write_text(json.dumps({**run, 'run': run}))
  with pytest.raises(UsageError) as error:
    cli_config.config_from([f'--model_dir={model_dir}', f'--mode={mode}'])
  assert str(error.value) == (
      f'{model_dir} holds a run of --model=subprocess:run, a builder of your '
      'own (its model.json): give --model=subprocess:run to run it (a '
      'model_dir names no code to import)')
  config = cli_config.config_from([f'--model_dir={model_dir}',
                                   f'--mode={mode}', '--model=subprocess:run'])
  assert config.model == 'subprocess:run'
  # A built-in model is taken from the record as before.
  (model_dir / 'model.json').write_text(json.dumps(
      {'model': 'resnet20', 'run': {'model': 'resnet20'}}))
  assert cli_config.config_from([f'--model_dir={model_dir}',
                                 f'--mode={mode}']).model == 'resnet20'


@pytest.fixture(scope='module')
def trained(tmp_path_factory, data):
  """A model_dir of 2 ctl steps of _run_flags' run."""
  model_dir = tmp_path_factory.mktemp('trained') / 'model'
  engines.ENGINES['ctl'].run(cli_config.config_from([
      f'--model_dir={model_dir}', '--engine=ctl', '--mode=train',
      '--train_steps=2', *_run_flags(data)]))
  return model_dir


@pytest.mark.parametrize('mode', ['evaluate', 'train'])
@pytest.mark.parametrize('flag, recorded', [
    ('--model=cnn', '--model=builders:mlp'),
    ('--model_kwargs={"hidden": 4}', '--model_kwargs={"hidden": 8}'),
    ('--image_shape=28,28,1', '--image_shape=12,12,3'),
    ('--num_classes=10', '--num_classes=3'),
])
def test_a_flag_that_disagrees_with_the_checkpoints_is_a_usage_error(
    trained, mode, flag, recorded):
  own = [] if flag.startswith('--model=') else [OWN_MODEL]
  with pytest.raises(UsageError) as error:
    cli_config.config_from([f'--model_dir={trained}', f'--mode={mode}',
                            flag, *own])
  assert str(error.value) == (
      f'{flag} disagrees with {trained}, whose checkpoints are of '
      f'{recorded} (its model.json): drop the flag, or use another '
      '--model_dir')


# The Config line and the record are this package's; the 2-replica ctl
# run under them, other both_stacks tests make on TensorFlow 2.21.
@pytest.mark.default_stack_only
@pytest.mark.slow
def test_the_cli_says_what_the_run_does_and_evaluates_from_the_record(
    tmp_path, data, capfd, caplog):
  """Through the CLI: the Config line of a TFRecord run on 2 replicas has
  its resolved batch, steps and data; --mode=evaluate needs only the
  model_dir; a disagreeing flag is one line, exit 2, before anything runs.
  The training run is the command's process (its console the Config line's);
  the evaluate and refused runs run.main in-process (its exit code and
  one-line error on stderr, the lines from the package's logger)."""
  model_dir = tmp_path / 'model'
  result = _cli(f'--model_dir={model_dir}', '--engine=ctl',
                '--strategy=mirrored', '--cpu_replicas=2', '--train_epochs=1',
                '--export=none', '--seed=7', *_run_flags(data))
  assert result.returncode == 0, result.stderr[-3000:]
  line = _config_line(result.stderr)
  assert line.startswith(
      'train_and_evaluate with engine ctl, strategy mirrored (2 replicas in '
      'sync); model builders:mlp {"hidden": 8}; data TFRecord files '
      f'{data}/train-* / {data}/test-*; batch 16 per replica, 32 global; '
      f'2 steps (1 epoch of {NUM_EXAMPLES} training examples); '), line
  assert "seed=7" in line and "image_key='image/encoded'" in line, line

  caplog.set_level(logging.INFO, logger='estimator_trainer')
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={model_dir}', '--mode=evaluate', OWN_MODEL], capfd)
  assert code == 0, stderr[-3000:]
  assert re.search(r'From \S+/model.json: .*--train_files=\S+/train-\* ',
                   caplog.text), caplog.text
  assert _config_line(caplog.text).startswith(
      'evaluate with engine ctl, strategy default (1 replica in sync); model '
      'builders:mlp {"hidden": 8}; data TFRecord files ')
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'num_examples'] == NUM_EXAMPLES

  before = sorted(p.name for p in model_dir.iterdir())
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={model_dir}', '--mode=export', '--image_shape=28,28,1',
       OWN_MODEL], capfd)
  assert code == 2
  assert stderr.strip().splitlines() == [
      f'error: --image_shape=28,28,1 disagrees with {model_dir}, whose '
      'checkpoints are of --image_shape=12,12,3 (its model.json): drop the '
      'flag, or use another --model_dir']
  assert sorted(p.name for p in model_dir.iterdir()) == before


@pytest.mark.skipif(stack.has_estimator(), reason='a stack without Estimator')
def test_a_run_of_the_estimator_engine_on_a_stack_without_it(tmp_path):
  model_dir = tmp_path / 'model'
  model_dir.mkdir()
  (model_dir / 'model.json').write_text(json.dumps(
      {'model': 'cnn', 'run': {'engine': 'estimator', 'model': 'cnn'}}))
  with pytest.raises(UsageError, match=(
      f'^{model_dir} holds a run of --engine=estimator \\(its model.json\\), '
      'which needs TensorFlow 2.15 with tensorflow-estimator; this is '
      'TensorFlow 2\\.')):
    cli_config.config_from([f'--model_dir={model_dir}', '--mode=evaluate'])
  # Given, the engine is the user's (which the checkpoint may then refuse).
  assert cli_config.config_from([f'--model_dir={model_dir}', '--mode=evaluate',
                                 '--engine=ctl']).engine == 'ctl'


def test_the_config_line_resolves_steps_epochs_and_batch():
  config = TrainConfig(model_dir='/tmp/m', global_batch_size=128,
                       train_steps=30, learning_rate=0.01)
  assert config.describe('cnn', 'fashion_mnist from IDX files in D', 2, 128,
                         30, 60000) == (
      'train_and_evaluate with engine ' + config.engine + ', strategy '
      'default (2 replicas in sync); model cnn; data fashion_mnist from IDX '
      'files in D; batch 64 per replica, 128 global; 30 steps (0.064 epochs '
      "of 60000 training examples); model_dir='/tmp/m', learning_rate=0.01")


def test_the_record_holds_local_data_paths_absolute(tmp_path, monkeypatch):
  """A later run may start in another directory."""
  monkeypatch.chdir(tmp_path)
  run = run_record.of(TrainConfig(model_dir='m', train_files='data/train-*',
                                  eval_files='gs://bucket/test-*'))
  assert (run['train_files'], run['eval_files']) == (
      f'{tmp_path}/data/train-*', 'gs://bucket/test-*')


def test_a_builder_that_no_module_names(tmp_path):
  """A run of the Python API with a builder of its script (__main__): the
  CLI needs its --model, and takes the rest of the run."""
  model_dir = tmp_path / 'model'
  model_dir.mkdir()
  (model_dir / 'model.json').write_text(json.dumps(
      {'model': '__main__:build', 'image_shape': [12, 12, 3],
       'run': {'model': '__main__:build', 'seed': 3}}))
  with pytest.raises(UsageError, match=(
      f'^{model_dir} holds a run of __main__:build, which no module names: '
      'give its --model=MODULE:FUNCTION$')):
    cli_config.config_from([f'--model_dir={model_dir}', '--mode=evaluate'])
  config = cli_config.config_from([f'--model_dir={model_dir}',
                                   '--mode=evaluate', '--model=builders:mlp'])
  assert (config.model, config.seed) == ('builders:mlp', 3)


def test_a_tf2_parameter_server_run_resumes_over_as_many_ps_tasks(tmp_path):
  """Keras's optimizer saves its slots of a partitioned variable per shard:
  over another number of ps tasks they would silently restart (measured by
  hand: 185 of 198 touched Adagrad accumulators fell back to 0.1 going from
  2 to 3 ps). model_dir records the count; another is a usage error."""
  def config(num_ps):
    return TrainConfig(
        model_dir=str(tmp_path), engine='ctl', strategy='parameter_server',
        cluster=cluster_lib.Cluster(
            jobs={'chief': ['localhost:1'],
                  'ps': [f'localhost:{2 + i}' for i in range(num_ps)]},
            task_type='chief', task_index=0, has_evaluator=False))

  checkpoints.record_model(str(tmp_path), config(2),
                           sources.DatasetSpec('mnist', (28, 28, 1), 10))
  checkpoints.require_same_parameter_servers(config(2))
  with pytest.raises(UsageError, match='trained over 2 parameter servers; '
                     'this cluster has 3'):
    checkpoints.require_same_parameter_servers(config(3))


def test_a_flag_given_over_a_recorded_setting_is_said(tmp_path, caplog):
  """A carried canned model's record holds canned's training settings; a
  flag given otherwise wins, and the run says so (not the steps: a resumed
  run usually has more). A JSON flag equal to the record's is no change."""
  (tmp_path / 'model.json').write_text(json.dumps({
      'model': 'cnn', 'model_kwargs': None, 'run': {
          'learning_rate': 0.05, 'optimizer': 'sgd', 'train_steps': 100,
          'optimizer_kwargs': {'momentum': 0.9}}}))
  with caplog.at_level(logging.INFO):
    config = cli_config.config_from([
        f'--model_dir={tmp_path}', '--mode=evaluate', '--learning_rate=0.5',
        '--train_steps=200', '--optimizer_kwargs={"momentum": 0.9}'])
  assert (config.learning_rate, config.optimizer, config.optimizer_kwargs,
          config.train_steps) == (0.5, 'sgd', {'momentum': 0.9}, 200)
  said = [r.getMessage() for r in caplog.records if 'given:' in
          r.getMessage()]
  assert said == [f'--learning_rate=0.5 given: the run in {tmp_path} had '
                  '--learning_rate=0.05'], said


def test_sgd_momentum_on_or_off_on_resume_is_a_usage_error(tmp_path):
  """The checkpoints hold SGD's momentum slots or not: --optimizer_kwargs
  turning it on (or off) on a resume disagrees with them, as
  --optimizer would (the estimator engine had failed as 'a checkpoint of a
  different model'); other parameters may change."""
  (tmp_path / 'model.json').write_text(json.dumps({
      'model': 'cnn', 'model_kwargs': None, 'run': {
          'optimizer': 'sgd', 'optimizer_kwargs': None}}))
  with pytest.raises(UsageError, match=(
      r'^--optimizer_kwargs=\{"momentum": 0.9\} disagrees with .*, whose '
      r"checkpoints are of a run without SGD's momentum")):
    cli_config.config_from([f'--model_dir={tmp_path}', '--mode=evaluate',
                            '--optimizer_kwargs={"momentum": 0.9}'])
  assert cli_config.config_from([
      f'--model_dir={tmp_path}', '--mode=evaluate',
      '--optimizer_kwargs={"momentum": 0}']).optimizer_kwargs == {
          'momentum': 0}


def test_a_csv_runs_own_command_repeated_takes_its_spec(tmp_path):
  """A run on CSV files alone (its spec inferred and stored, the label
  --label_key) repeated as it was given: the stored spec, whose label the
  flag names, not '--label_key is for images'; another label is the usage
  error naming both (issue 76, item 2)."""
  (tmp_path / 'model.json').write_text(json.dumps({
      'model': 'linear', 'model_kwargs': None, 'head': 'binary', 'run': {
          'train_files': str(tmp_path / 'data.csv'), 'label_key': 'y'}}))
  spec = layout.feature_spec_file(str(tmp_path))
  os.makedirs(os.path.dirname(spec))
  with open(spec, 'w') as f:
    json.dump({'columns': {'age': {'kind': 'float'}}, 'label': 'y'}, f)
  command = [f'--model_dir={tmp_path}', f'--train_files={tmp_path}/data.csv',
             '--mode=evaluate']
  config = cli_config.config_from([*command, '--label_key=y'])
  assert (config.feature_spec, config.label_key) == (spec, 'label')
  with pytest.raises(UsageError, match=(
      r"^--label_key=age disagrees with .*, whose checkpoints are of the "
      r"label 'y' \(its feature spec")):
    cli_config.config_from([*command, '--label_key=age'])


@pytest.mark.both_stacks
@pytest.mark.skipif(stack.has_estimator(), reason='tf.estimator is here')
def test_the_estimator_engine_on_a_stack_without_it_names_the_way_on(
    tmp_path, capfd):
  """--engine=estimator on TensorFlow 2.21: one line, exit 2, naming the
  model_dir and migrate (as migrate.md says; issue 76, item 3)."""
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={tmp_path}', '--engine=estimator', '--train_steps=1'],
      capfd)
  last = stderr.strip().splitlines()[-1]
  assert code == 2, stderr[-3000:]
  assert last.startswith(f'error: --engine=estimator (on {tmp_path}: '
                         '`python -m estimator_trainer.migrate'), last


def test_a_csv_runs_own_command_repeated_with_another_identity_is_refused(
    tmp_path, caplog):
  """The one-command CSV run repeated, a flag added: one equal to what the
  run recorded is taken; another head, model kwargs or feature spec is a
  usage error naming both (issue 76, item 2; they had been taken silently:
  a binary run resumed as a regression, a linear model given hidden units,
  and a given spec failed as '--label_key is for images'). A schedule flag
  is taken and said."""
  rows = [f'{i / 10},{"red" if i % 3 else "blue"},{i % 2}' for i in range(40)]
  (tmp_path / 'data.csv').write_text('\n'.join(['x,color,target', *rows]))
  model_dir = tmp_path / 'model'
  command = [f'--model_dir={model_dir}', f'--train_files={tmp_path}/data.csv',
             '--label_key=target', '--train_steps=2', '--mode=train']
  cli_config.run_in_process(command)
  stored = layout.stored_feature_spec(str(model_dir))
  other = json.loads(pathlib.Path(stored).read_text())
  del other['columns']['color']
  (tmp_path / 'other.json').write_text(json.dumps(other))
  for flag in ('--head=binary', '--model_kwargs={}', '--model=linear'):
    assert cli_config.config_from([*command, flag]).feature_spec == stored
  for flag, message in [
      ('--head=regression', '--head=regression disagrees with {}, whose '
       'checkpoints are of --head=binary (its model.json)'),
      ('--model_kwargs={"hidden_units": [8]}', '--model_kwargs={{"hidden_'
       'units": [8]}} disagrees with {}, whose checkpoints are of a run '
       'without --model_kwargs (its model.json)')]:
    with pytest.raises(UsageError, match='^' + re.escape(
        message.format(model_dir))):
      cli_config.config_from([*command, flag])
  spec_given = [*command[:2], *command[3:], f'--feature_spec={stored}']
  assert cli_config.config_from(spec_given).label_key == 'label'
  config = cli_config.config_from(
      [*command[:2], *command[3:], f'--feature_spec={tmp_path}/other.json'])
  with pytest.raises(UsageError, match=re.escape(
      f'--feature_spec={tmp_path}/other.json differs from {stored}')):
    dataset.feature_spec_of(config)
  caplog.set_level(logging.INFO)
  cli_config.config_from([*command, '--learning_rate=0.5'])
  assert '--learning_rate=0.5 given: the run in' in caplog.text


@pytest.mark.parametrize('engine', ['ctl', pytest.param(
    'estimator', marks=pytest.mark.estimator)])
def test_a_run_left_to_the_default_length_resumes_its_own_plan(
    tmp_path, monkeypatch, engine):
  """A structured run that gave no --train_steps or --train_epochs records
  its plan, the floor's steps: its own command, run again after the floor
  changed (the linear model's went from 2,000 to 4,000 in issue 72), finds
  it finished instead of training on under a longer schedule; a given
  --train_steps extends it, a given --train_epochs is its own plan."""
  rows = [f'{i / 10},{"red" if i % 3 else "blue"},{i % 2}' for i in range(40)]
  (tmp_path / 'data.csv').write_text('\n'.join(['x,color,y', *rows]))
  model_dir = tmp_path / 'model'
  command = [f'--model_dir={model_dir}', f'--train_files={tmp_path}/data.csv',
             '--label_key=y', '--model=dnn', f'--engine={engine}',
             '--mode=train', '--model_kwargs={"hidden_units": [4]}']
  # 32 training rows: 10 epochs are 5 steps of 64, under either floor.
  monkeypatch.setattr(config_checks, 'MIN_STRUCTURED_STEPS', 6)
  cli_config.run_in_process(command)
  assert layout.read_model_file(str(model_dir))['run']['train_steps'] == 6
  assert checkpoints.latest_step(str(model_dir)) == 6
  monkeypatch.setattr(config_checks, 'MIN_STRUCTURED_STEPS', 10)
  assert cli_config.run_in_process(command).train_steps == 6
  assert checkpoints.latest_step(str(model_dir)) == 6
  cli_config.run_in_process([*command, '--train_steps=8'])
  assert checkpoints.latest_step(str(model_dir)) == 8
  config = cli_config.config_from([*command, '--train_epochs=20'])
  assert (config.train_steps, config.train_epochs) == (None, 20)
