"""The three engines train `dnn` and `wide_deep` alike on small tables
(issue 72, item 4), shuffled as a default run is and with the default
recipe's L2: a multiclass and a regression table, as the image engines'
one-epoch agreement test does."""

import json

import pytest
import tensorflow as tf

from estimator_trainer import config_resolved
from estimator_trainer import engines
from estimator_trainer.config import TrainConfig
from estimator_trainer.tabular import dataset
import cli_config
import tabular_sets

pytestmark = [pytest.mark.slow, pytest.mark.estimator]

# Long enough for the order of the batches to show: with the engines on
# other orders of one seed (before issue 72's fix) ctl's average_loss was
# 3.4 % off Estimator's (multiclass) and its RMSE 1.4 % (regression). Short
# of where float rounding grows into the run: measured, the engines agree
# to 0.15 % at 400 steps, 0.36 % at 600 (tf.compat.v1's Adam and Keras's
# round differently; over 2,000 steps an over-fitting table amplifies that
# past 1 %, as a learning rate 5e-7 higher does in one engine: the tabular
# guide's figures). With the deep models' default L2 (issue 72, item 3),
# which these runs take, they agree closer: at 400 steps the multiclass
# dnn's average_loss to 0.005 % (0.19325 vs 0.19324), the regression's
# RMSE to 0.013 % (0.53556 vs 0.53563). Since Keras's Adam takes beta in
# float32 as v1's does (optimizers.py), with the recipe's periodic
# embeddings on: all three to the 5 digits printed (multiclass dnn 0.956 /
# 0.17875, wide_deep 0.93322 / 0.17924; regression dnn RMSE 0.53353,
# wide_deep 0.53396). The tolerance stays issue 72's bar.
STEPS = 400
TOLERANCE = {'accuracy': 0.002}  # Absolute; the others relative.
RELATIVE = 0.005


@pytest.fixture(scope='module')
def sets(tmp_path_factory):
  return tabular_sets.write(tmp_path_factory.mktemp('tabular'))


@pytest.mark.parametrize('model', ['dnn', 'wide_deep'])
@pytest.mark.parametrize('name', ['multiclass', 'regression'])
def test_the_engines_train_a_model_alike(sets, tmp_path, name, model):
  """accuracy to 0.002; RMSE and average_loss to 0.5 % (the accuracy of the
  58 evaluation rows moves in steps of 0.017: the loss shows smaller
  differences)."""
  data = sets[name]
  results = {}
  for engine in ('estimator', 'ctl', 'keras'):
    config = TrainConfig(
        model_dir=str(tmp_path / engine), engine=engine, model=model,
        train_files=data.train_files, eval_files=data.eval_files,
        feature_spec=data.feature_spec, train_steps=STEPS, export='none')
    results[engine] = engines.ENGINES[engine].run(config)
  # The runs took the default recipe's L2, not none.
  spec = dataset.load(config).spec
  assert config_resolved.weight_decay_of(config, spec) == (
      spec.deep_weight_decay) > 0
  keys = [key for key in ('accuracy', 'root_mean_squared_error',
                          'average_loss') if key in results['ctl']]
  print(f'{name} {model}:', {engine: {key: round(result[key], 5)
                                      for key in keys}
                             for engine, result in results.items()})
  expected = results['estimator']
  for engine in ('ctl', 'keras'):
    for key in keys:
      assert results[engine][key] == pytest.approx(
          expected[key], abs=TOLERANCE.get(key, 0),
          rel=0 if key in TOLERANCE else RELATIVE), (engine, key)


def test_the_numbers_periodic_embeddings_train_alike(sets, tmp_path):
  """`--model_kwargs='{"numeric_embedding": true}'` through the CLI's flags:
  both engines build the layer (in their checkpoints), draw the same
  initial values and train the multiclass dnn alike."""
  data = sets['multiclass']
  results = {}
  for engine in ('estimator', 'ctl'):
    model_dir = tmp_path / engine
    cli_config.run_in_process([
        f'--model_dir={model_dir}', f'--engine={engine}', '--model=dnn',
        '--model_kwargs={"numeric_embedding": true}',
        f'--train_files={data.train_files}',
        f'--eval_files={data.eval_files}',
        f'--feature_spec={data.feature_spec}', '--train_steps=40',
        '--export=none'])
    results[engine] = json.loads((model_dir / 'metrics.json').read_text())
    # Estimator's names or the TF2 checkpoint's object paths: both end so.
    assert any(name.split('/.')[0].endswith('/frequencies') for name, _ in
               tf.train.list_variables(str(model_dir))), engine
  print({engine: {key: round(result[key], 5) for key in (
      'accuracy', 'average_loss')} for engine, result in results.items()})
  for key in ('accuracy', 'average_loss'):
    assert results['ctl'][key] == pytest.approx(
        results['estimator'][key], abs=TOLERANCE.get(key, 0),
        rel=0 if key in TOLERANCE else RELATIVE), key
