"""FTRL keeps a constant rate under --lr_decay=cosine, as canned Estimators
do: its weights are a closed form of its accumulators over the current rate,
so a rate decayed to 0 would end them at 0 (a linear model at AUC 0.5, a
wide & deep whose wide part is silently gone), in both kinds of engine."""

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
import engine_params
import tabular_sets
from tabular_sets import examples
from test_tabular_runs import config, export_dir, metrics, model_weights

pytestmark = pytest.mark.slow

# Unshuffled, a global batch of 16, the default --lr_decay (cosine).
FLAGS = {'global_batch_size': 16, 'shuffle_buffer': 0,
         'save_checkpoints_steps': 1000, 'export': 'final'}


@pytest.fixture(scope='module')
def sets(tmp_path_factory):
  directory = tmp_path_factory.mktemp('tabular')
  return {'binary': tabular_sets.write(directory)['binary'],
          'census': tabular_sets.write_census(directory / 'census')}


@pytest.mark.both_stacks
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_a_linear_model_under_the_default_schedule_scores(sets, tmp_path,
                                                          engine):
  """--model=linear --optimizer=ftrl on breast cancer, 200 steps (8
  epochs): far from AUC 0.5, where a rate decayed to 0 leaves it."""
  engines.ENGINES[engine].run(config(
      tmp_path, sets['binary'], engine=engine, model='linear',
      optimizer='ftrl', learning_rate=0.1, train_steps=200, **FLAGS))
  auc = metrics(tmp_path)['auc']
  print(f'{engine}: AUC {auc:.4f}')
  assert auc > 0.9


def _served_logits(loaded, serialized):
  return loaded.signatures['predict'](examples=serialized)['logits'].numpy()


@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_wide_deep_keeps_its_wide_part(sets, tmp_path, engine):
  """--model=wide_deep --linear_optimizer=ftrl (Adagrad for the deep part,
  canned wide & deep's pair), 60 steps: the wide weights are not ~0, and
  the export serves other logits once they are zeroed."""
  data = sets['census']
  engines.ENGINES[engine].run(config(
      tmp_path, data, engine=engine, model='wide_deep', optimizer='adagrad',
      learning_rate=0.05, linear_optimizer='ftrl', linear_learning_rate=0.2,
      train_steps=60, **FLAGS))
  wide = {name: value for name, value in model_weights(tmp_path).items()
          if name.startswith('linear/')}
  largest = max(float(np.abs(value).max()) for value in wide.values())
  print(f'{engine}: largest wide weight {largest:.2e}')
  assert largest > 0.1
  loaded = tf.saved_model.load(str(export_dir(tmp_path)))
  # The estimator engine's export is a TF1 SavedModel, the TF2 engines' a
  # module serving the Keras model.
  variables = getattr(loaded, 'variables', None) or loaded.model.variables
  zeroed = [v for v in variables if v.name.split(':')[0] in wide]
  assert len(zeroed) == len(wide), [v.name for v in variables]
  serialized = tf.constant(examples(data.eval_rows))
  served = _served_logits(loaded, serialized)
  for variable in zeroed:
    variable.assign(tf.zeros_like(variable))
  change = np.abs(_served_logits(loaded, serialized) - served).mean()
  print(f'{engine}: mean change of the served logits {change:.2e}')
  assert change > 0.1
