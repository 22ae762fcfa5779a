"""The deep part's periodic numerical embeddings (issue 72, item 3): the
`numeric_embedding` model kwarg of `dnn` and `wide_deep`."""

import math

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import models as models_lib
from estimator_trainer.errors import UsageError
from estimator_trainer.models import tabular
from estimator_trainer.models.numeric_embedding import NumericEmbedding
from test_tabular_models import INPUTS, features


def test_each_number_enters_with_its_own_periodic_embedding():
  """[x, relu(W_i (cos 2 pi f_i x_i, sin 2 pi f_i x_i) + b_i)] per number i,
  against NumPy's loop over the numbers."""
  numbers, frequencies, units = 3, 4, 5
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, numbers)).astype(np.float32)
  layer = NumericEmbedding(frequencies, 0.1, units, seeds=(1, 2))
  assert layer(x).shape == (6, numbers + numbers * units)
  for variable in layer.weights:  # The bias starts at zero.
    variable.assign(rng.normal(size=variable.shape))
  f, w, b = (v.numpy() for v in (layer.frequency, layer.kernel, layer.bias))
  expected = [x]
  for i in range(numbers):
    angles = 2 * math.pi * x[:, i:i + 1] * f[i]
    periodic = np.concatenate([np.cos(angles), np.sin(angles)], -1)
    expected.append(np.maximum(periodic @ w[i] + b[i], 0))
  np.testing.assert_allclose(layer(x), np.concatenate(expected, -1),
                             rtol=1e-5, atol=1e-5)


def test_frequencies_are_out_of_the_weight_decay_and_the_kernel_in():
  model = models_lib.build('dnn', INPUTS, 3, seed=1, weight_decay=0.5,
                           model_kwargs={'numeric_embedding': True})
  names = {v.name: v for v in model.trainable_variables}
  assert names['dnn/numeric_embedding/frequencies:0'].shape == (4, 8)
  assert names['dnn/numeric_embedding/kernel:0'].shape == (4, 16, 8)
  assert names['dnn/hidden_0/kernel:0'].shape[0] == 4 + 4 * 8 + 9 + 4
  for variable in model.trainable_variables:
    variable.assign(tf.random.stateless_normal(variable.shape, (1, 2)))
  decayed = [v for name, v in names.items() if 'kernel' in name]
  assert len(decayed) == len(model.losses) == 4
  expected = 0.5 * sum(float(tf.reduce_sum(tf.square(v))) for v in decayed)
  assert float(tf.add_n(model.losses)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize('builder', ['dnn', 'wide_deep'])
def test_a_seed_fixes_the_initial_values(builder):
  """As every engine builds the model: the same seed, the same values
  (frequencies from N(0, sigma^2)); another seed, others."""
  def initial(seed):
    model = models_lib.build(builder, INPUTS, 2, seed=seed, model_kwargs={
        'numeric_embedding': {'frequencies': 50, 'sigma': 0.5}})
    return {v.name: v.numpy() for v in model.weights
            if 'numeric_embedding' in v.name}
  first, again, other = initial(7), initial(7), initial(8)
  for name, value in first.items():
    np.testing.assert_array_equal(value, again[name])
  frequencies = first['dnn/numeric_embedding/frequencies:0']
  assert np.std(frequencies) == pytest.approx(0.5, rel=0.15)
  assert not np.array_equal(frequencies,
                            other['dnn/numeric_embedding/frequencies:0'])
  model = models_lib.build(builder, INPUTS, 2, seed=7, model_kwargs={
      'numeric_embedding': True})
  assert model(features()).shape == (4, 2)


@pytest.mark.parametrize('value, message', [
    ({'frequency': 8}, 'numeric_embedding must be true, false or an object'),
    ('yes', 'numeric_embedding must be true'),
    ({'frequencies': 0}, 'frequencies must be a positive integer, got 0'),
    ({'units': 2.5}, 'units must be a positive integer, got 2.5'),
    ({'sigma': -1}, 'sigma must be a positive number, got -1'),
    ({'sigma': True}, 'sigma must be a positive number'),
])
def test_bad_settings_are_usage_errors(value, message):
  with pytest.raises(UsageError, match=message):
    tabular.dnn(INPUTS, 2, numeric_embedding=value)


def test_off_is_the_model_without_it():
  names = [v.name for v in tabular.dnn(INPUTS, 2, seed=1).weights]
  assert names == [v.name for v in tabular.dnn(
      INPUTS, 2, seed=1, numeric_embedding=False).weights]
  assert not any('numeric' in name for name in names)


def test_a_model_with_it_saves_and_serves_the_same(tmp_path):
  """The export's tf.saved_model.save of the model with weight decay, and
  Keras's config round trip of the layer."""
  model = models_lib.build('wide_deep', INPUTS, 3, seed=1, weight_decay=0.5,
                           model_kwargs={'numeric_embedding': {'units': 2}})
  inputs = features()
  tf.saved_model.save(model, str(tmp_path / 'saved'))
  served = tf.saved_model.load(str(tmp_path / 'saved'))
  np.testing.assert_allclose(served(inputs), model(inputs), rtol=1e-6)
  layer = model.get_layer('dnn/numeric_embedding')
  again = NumericEmbedding.from_config(layer.get_config())
  assert (again.frequencies, again.sigma, again.units, again.seeds) == (
      8, 0.1, 2, layer.seeds)
