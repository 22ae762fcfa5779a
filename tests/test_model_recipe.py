"""The structured-data recipe's model kwargs (model_recipe.py; issue 72): a
new `dnn` or `wide_deep` run embeds its numbers and records so; a model_dir
whose record is from before (no `numeric_embedding` in it) resumes, warm-
starts a run and migrates as the model without them; the run's own command,
its --model_kwargs too, resumes either."""

import csv
import json
import sys

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import model_recipe
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
import cli_config
import engine_params
import tabular_sets
import warm_process


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  path = tmp_path_factory.mktemp('recipe') / 'data.csv'
  rows = [f'{i / 10},{(i * 7) % 11 / 3:.3f},{"red" if i % 3 else "blue"},'
          f'{int(i % 3 == 0 or i > 40)}' for i in range(60)]
  path.write_text('\n'.join(['x,z,color,y', *rows]) + '\n')
  return path


def _command(model_dir, data, *flags, engine='ctl', steps=2):
  return [f'--model_dir={model_dir}', f'--train_files={data}',
          '--label_key=y', '--model=dnn', f'--engine={engine}',
          f'--train_steps={steps}', '--mode=train', *flags]


def _kwargs(model_dir):
  return layout.read_model_file(str(model_dir))['model_kwargs']


def _embeds(model_dir):
  """Whether model_dir's latest checkpoint holds the embedding's weights."""
  path = tf.train.latest_checkpoint(str(model_dir))
  return any('frequencies' in name for name, _ in tf.train.list_variables(path))


def _check_served_as_predicted(model_dir, data, engine):
  """--mode=predict's lines, as model_dir's final export serves their rows
  (the embedding in the SavedModel's graph; test_tabular_runs serves
  canned's network)."""
  path = model_dir / 'predictions.jsonl'
  cli_config.run_in_process(_command(
      model_dir, data, '--mode=predict', '--num_predictions=5',
      f'--predictions_file={path}', engine=engine))
  lines = [json.loads(line) for line in path.read_text().splitlines()]
  with open(data, newline='') as f:
    rows = list(csv.DictReader(f))  # Line 1 is the header.
  picked = [rows[line['line'] - 2] for line in lines]
  table = {name: np.array([float(row[name]) for row in picked], np.float32)
           for name in ('x', 'z')}
  table['color'] = np.array([row['color'] for row in picked])
  export = sorted((model_dir / 'export' / 'final').iterdir())[-1]
  served = tf.saved_model.load(str(export)).signatures['predict'](
      examples=tf.constant(tabular_sets.examples(table)))
  np.testing.assert_allclose([line['probabilities'] for line in lines],
                             served['probabilities'].numpy(), atol=1e-6,
                             rtol=1e-6)


def _recorded_as(model_dir, kwargs):
  """model_dir's record with its model kwargs as `kwargs`: the versions
  before the default wrote none of numeric_embedding."""
  path = layout.model_file(str(model_dir))
  with open(path) as f:
    record = json.load(f)
  record['model_kwargs'] = record['run']['model_kwargs'] = kwargs
  with open(path, 'w') as f:
    json.dump(record, f)


def _as_before(model_dir):
  """A run without --model_kwargs, as the versions before recorded it."""
  assert _kwargs(model_dir) == {'numeric_embedding': False}
  _recorded_as(model_dir, None)


@pytest.mark.slow
@pytest.mark.parametrize('engine', [
    engine_params.param('estimator'),
    engine_params.param('ctl', both_stacks=True)])  # 2.21's default engine.
def test_a_new_run_embeds_and_a_model_dir_from_before_resumes_without(
    tmp_path, data, engine):
  """A new run's record says it embeds (a resume then rebuilds what its
  checkpoint holds, whatever the default); a model_dir from before resumes
  without, as trained: the default there would fail its restore."""
  new = tmp_path / 'new'
  cli_config.run_in_process(_command(
      new, data, '--mode=train_and_evaluate', engine=engine))
  assert _kwargs(new) == {'numeric_embedding': True}
  assert _embeds(new)
  _check_served_as_predicted(new, data, engine)
  old = tmp_path / 'old'
  cli_config.run_in_process(_command(
      old, data, '--model_kwargs={"numeric_embedding": false}', engine=engine))
  _as_before(old)
  assert not _embeds(old)
  cli_config.run_in_process(_command(old, data, engine=engine, steps=4))
  assert layout.checkpoint_step(tf.train.latest_checkpoint(str(old))) == 4
  assert not _embeds(old)
  assert _kwargs(old) == {'numeric_embedding': False}  # Pinned now.
  # Warm-started from its checkpoint (a prefix: it had been refused as
  # "does not exist"), a new run is its model.
  started = tmp_path / 'started'
  checkpoint = tf.train.latest_checkpoint(str(old))
  cli_config.run_in_process(_command(
      started, data, f'--warm_start_from={checkpoint}', engine=engine))
  assert not _embeds(started)


@pytest.mark.both_stacks
def test_the_runs_own_command_with_model_kwargs_resumes_and_another_is_refused(
    tmp_path, data):
  """--model_kwargs without the setting take the record's (the run's own
  command agrees with it); one that gives another is the usage error that
  names both."""
  model_dir = tmp_path / 'model'
  hidden = '--model_kwargs={"hidden_units": [4]}'
  cli_config.run_in_process(_command(model_dir, data, hidden))
  assert _kwargs(model_dir) == {'hidden_units': [4], 'numeric_embedding': True}
  cli_config.run_in_process(_command(model_dir, data, hidden, steps=3))
  assert _embeds(model_dir)
  _recorded_as(model_dir, {'hidden_units': [4]})  # From before.
  evaluate = _command(model_dir, data, '--mode=evaluate')
  assert cli_config.config_from([*evaluate, hidden]).model_kwargs == {
      'hidden_units': [4]}
  with pytest.raises(UsageError, match=(
      r'^--model_kwargs=\{"hidden_units": \[4\], "numeric_embedding": true\} '
      r'disagrees with .*, whose checkpoints are of --model_kwargs='
      r'\{"hidden_units": \[4\], "numeric_embedding": false\} \(its '
      r'model.json\)')):
    cli_config.config_from([
        *evaluate,
        '--model_kwargs={"hidden_units": [4], "numeric_embedding": true}'])


@pytest.mark.both_stacks
def test_what_a_run_builds_follows_its_model_dir_or_warm_start(tmp_path):
  """Without a checkpoint: the recipe's, or what --warm_start_from's record
  (a model_dir, or a checkpoint in one) says, a record from before or none
  (a canned model_dir) meaning without; given kwargs and other models are
  left as they are."""
  before = tmp_path / 'before'
  before.mkdir()
  (before / 'model.json').write_text(json.dumps({'model_kwargs': None}))
  canned = tmp_path / 'canned'
  canned.mkdir()

  def kwargs(**fields):
    config = TrainConfig(model_dir=str(tmp_path / 'new'), model='dnn',
                         **fields)
    return model_recipe.resolved(config).model_kwargs

  assert kwargs() == {'numeric_embedding': True}
  assert kwargs(model_kwargs={'dropout': 0.1}) == {
      'dropout': 0.1, 'numeric_embedding': True}
  assert kwargs(model_kwargs={'numeric_embedding': None}) == {
      'numeric_embedding': None}
  (before / 'model.ckpt-5.index').touch()
  for source in (before, before / 'model.ckpt-5', canned):
    assert kwargs(warm_start_from=str(source)) == {'numeric_embedding': False}
  # A canned model_dir kept inside a new run's is read as itself, not as
  # the outer run's record says.
  (tmp_path / 'new').mkdir()
  (tmp_path / 'new' / 'model.json').write_text(json.dumps(
      {'model_kwargs': {'numeric_embedding': True}}))
  nested = tmp_path / 'new' / 'canned'
  nested.mkdir()
  (nested / 'model.ckpt-5.index').touch()
  for source in (nested, nested / 'model.ckpt-5'):
    assert kwargs(warm_start_from=str(source)) == {'numeric_embedding': False}
  assert kwargs(warm_start_from=str(tmp_path / 'new')) == {
      'numeric_embedding': True}
  linear = TrainConfig(model_dir=str(tmp_path / 'new'), model='linear')
  assert model_recipe.resolved(linear) is linear


@pytest.mark.slow
@pytest.mark.default_stack_only
def test_an_estimator_model_dir_from_before_migrates_without(
    estimator, tmp_path, data):
  """migrate carries an estimator engine's model_dir from before into the
  model without the embedding, which its checkpoint holds (a new model_dir
  would have had the default); and a new run's, with it."""
  del estimator
  for name, flags in (('old', ['--model_kwargs={"numeric_embedding": false}']),
                      ('new', [])):
    source = tmp_path / name
    cli_config.run_in_process(_command(source, data, *flags,
                                       engine='estimator'))
    if name == 'old':
      _as_before(source)
    carried = tmp_path / f'{name}_tf2'
    result = warm_process.run(
        [sys.executable, '-m', 'estimator_trainer.migrate',
         f'--from={source}', f'--to={carried}'], 600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _embeds(carried) == (name == 'new')
    assert _kwargs(carried) == {'numeric_embedding': name == 'new'}
