"""An optimizer per part of wide & deep (--linear_optimizer, as canned
DNNLinearCombined Estimators' linear_optimizer and dnn_optimizer): each part
steps with its own optimizer and rate, in every engine alike, on 1 and 2
replicas; the step counts once; migrate carries both
optimizers' slots, so a carried run steps on as the Estimator's does."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
from estimator_trainer import stack
from estimator_trainer.errors import UsageError
from estimator_trainer.tf2 import migration
import cli_config
import tabular_sets
from test_tabular_runs import FLAGS, config, model_weights

pytestmark = pytest.mark.slow

WIDE_DEEP = {**FLAGS, 'model': 'wide_deep', 'mode': 'train',
             'export': 'none'}
# Canned wide & deep's pair: FTRL for the wide part, Adagrad for the deep.
CANNED = {'optimizer': 'adagrad', 'linear_optimizer': 'ftrl',
          'learning_rate': 0.05, 'linear_learning_rate': 0.2}
# Each part's optimizer parameters (--optimizer_kwargs,
# --linear_optimizer_kwargs): SGD's momentum (its sparse steps on the hashed
# id's embedding rows a batch looks up) and FTRL's l1, l2 and power.
WITH_KWARGS = {**CANNED, 'optimizer': 'sgd',
               'optimizer_kwargs': {'momentum': 0.9},
               'linear_optimizer_kwargs': {
                   'l1_regularization_strength': 0.01,
                   'l2_regularization_strength': 0.1,
                   'learning_rate_power': -0.3}}
SETTINGS = [pytest.param(CANNED, id='canned'),
            pytest.param(WITH_KWARGS, id='kwargs')]


@pytest.fixture(scope='module')
def census(tmp_path_factory):
  """The census-like set's CENSUS_COLUMNS: a number, a vocabulary and a
  hashed id, each in both parts; the other columns only add graph."""
  directory = tmp_path_factory.mktemp('tabular')
  return tabular_sets.narrowed(tabular_sets.write_census(directory),
                               directory / 'narrowed')


def train(model_dir, data, engine, replicas=1, **flags):
  engines.ENGINES[engine].run(config(
      model_dir, data, engine=engine,
      strategy='mirrored' if replicas > 1 else 'default',
      cpu_replicas=replicas if replicas > 1 else 0,
      **{**WIDE_DEEP, **flags}))
  return model_weights(model_dir)


def changes(model_dir, data, engine, replicas=1, **flags):
  """Each weight's change in one step (from the fresh build, which is
  every engine's start)."""
  final = train(model_dir, data, engine, replicas, train_steps=1, **flags)
  initial = model_weights(model_dir, 'initial')
  return {name: final[name] - value for name, value in initial.items()}


def _relative(a, b, names):
  return max(float(np.linalg.norm(a[k] - b[k]) / np.linalg.norm(b[k]))
             for k in names)


# The TF2 engines share the step (tf2/updates.py); the keras and estimator
# engines' per-part steps are test_the_engines_and_2_replicas_step_alike's:
# the same weights as ctl's under two optimizers of two rates.
@pytest.mark.parametrize('engine', ['ctl'])
def test_each_part_steps_with_its_own_rate_and_optimizer(census, tmp_path,
                                                         engine):
  """One SGD step with the wide part's rate 3x: its change triples, the deep
  part's stays; FTRL on the wide part moves it otherwise and leaves the deep
  part's step alone. A resume cannot change the optimizers."""
  sgd = {'optimizer': 'sgd', 'learning_rate': 0.1}
  whole = changes(tmp_path / 'whole', census, engine, **sgd)
  tripled = changes(tmp_path / 'tripled', census, engine, **sgd,
                    linear_optimizer='sgd', linear_learning_rate=0.3)
  ftrl = changes(tmp_path / 'ftrl', census, engine, **sgd,
                 linear_optimizer='ftrl')
  wide = [name for name in whole if name.startswith('linear/')]
  deep = [name for name in whole if name.startswith('dnn/')]
  assert wide and deep and len(wide) + len(deep) == len(whole), list(whole)
  for name, change in whole.items():
    assert np.linalg.norm(change) > 0, f'{name} did not train'
  assert _relative(tripled, {k: 3 * whole[k] for k in wide}, wide) < 1e-4
  assert _relative(tripled, whole, deep) < 1e-5
  assert _relative(ftrl, whole, deep) < 1e-5
  assert _relative(ftrl, whole, wide) > 0.1
  # One step counted, not one per optimizer.
  for model_dir in ('whole', 'tripled', 'ftrl'):
    assert tf.train.latest_checkpoint(str(tmp_path / model_dir)).endswith(
        '-1'), model_dir
  # The checkpoint holds the optimizers' slots: resuming 'whole' (a run
  # without --linear_optimizer) with one is a usage error naming both. In
  # process: the package's logic (run_record.py); the CLI's exit 2 and
  # one-line message for such a flag are test_model_dir_record's.
  with pytest.raises(UsageError) as error:
    cli_config.config_from([f'--model_dir={tmp_path / "whole"}',
                            '--train_steps=2', '--linear_optimizer=ftrl'])
  assert str(error.value).startswith(
      f'--linear_optimizer=ftrl disagrees with {tmp_path / "whole"}, whose '
      'checkpoints are of a run without --linear_optimizer (its '
      'model.json)'), error.value


@pytest.mark.parametrize('settings', SETTINGS)
def test_the_engines_and_2_replicas_step_alike(census, tmp_path, settings):
  """FTRL + Adagrad at two rates (and FTRL + SGD with each one's
  parameters), 3 steps: every engine, and ctl on 2 replicas, reach the
  same weights (each part steps with its own optimizer and rate, of the
  global batch) and count 3 steps, not 3 per optimizer."""
  runs = [('ctl', 1), ('ctl', 2), ('keras', 1)]
  if stack.has_estimator():
    runs.append(('estimator', 1))
  trained = {run: train(tmp_path / f'{run[0]}{run[1]}', census, *run,
                        train_steps=3, **settings) for run in runs}
  reference = trained['ctl', 1]
  for run, weights in trained.items():
    score = _relative(weights, reference, reference)
    print(f'{run}: {score:.1e} from ctl on 1 replica')
    assert score < 1e-3, run
    assert tf.train.latest_checkpoint(
        str(tmp_path / f'{run[0]}{run[1]}')).endswith('-3'), run


# Under the cosine alone: its step 3 moves both parts (Adagrad's rate a
# quarter of its start, FTRL's constant in both engines), so each slot set
# counts as it would without decay; the engines' constant rates alike are
# test_the_engines_and_2_replicas_step_alike's.
@pytest.mark.estimator
@pytest.mark.parametrize('settings', SETTINGS)
def test_migrate_carries_both_optimizers_slots(census, tmp_path, settings):
  """An Estimator's wide & deep, FTRL + Adagrad (and FTRL + SGD with
  momentum, each with its parameters), carried to ctl at step 2, steps to 3
  as the Estimator does: both slot sets placed, each with its part, under
  the cosine (FTRL's rate constant in both; SGD's momentum one formulation
  in both, whatever the rate)."""
  canned = {**settings, 'lr_decay': 'cosine'}
  estimator_dir = tmp_path / 'estimator'
  train(estimator_dir, census, 'estimator', train_steps=2, **canned)
  carried = tmp_path / 'ctl'
  # In process: the migrate command on structured data is test_tabular_runs'.
  migration.convert(config(carried, census, engine='ctl',
                           **{**WIDE_DEEP, **canned}), str(estimator_dir))
  resumed = tmp_path / 'estimator_resumed'
  shutil.copytree(estimator_dir, resumed)
  expected = train(resumed, census, 'estimator', train_steps=3, **canned)
  weights = train(carried, census, 'ctl', train_steps=3, **canned)
  assert tf.train.latest_checkpoint(str(carried)).endswith('ckpt-3')
  at_2 = model_weights(estimator_dir)
  moved = {k: expected[k] - at_2[k] for k in expected}
  score = _relative({k: weights[k] - at_2[k] for k in expected}, moved,
                    moved)
  print(f'carried ctl step 3 vs the Estimator\'s: {score:.1e}')
  assert score < 1e-3
