"""The tabular models: linear, dnn and wide_deep on encoded inputs."""

import dataclasses
from typing import Optional

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer.errors import UsageError
from estimator_trainer.models import tabular as models


@dataclasses.dataclass(frozen=True)
class EncodedInput:
  """A stand-in of the Encoder's EncodedInput (same fields)."""

  kind: str
  width: Optional[int] = None
  cardinality: Optional[int] = None
  embedding_dim: Optional[int] = None
  cross: bool = False


INPUTS = {
    'age': EncodedInput('dense', width=1),
    'scores': EncodedInput('dense', width=3),
    'color': EncodedInput('ids', cardinality=5),
    'zip': EncodedInput('ids', cardinality=100, embedding_dim=4),
    'color_X_zip': EncodedInput('ids', cardinality=50, cross=True),
}


def features(batch=4, seed=0):
  rng = np.random.default_rng(seed)
  out = {}
  for name, encoded in INPUTS.items():
    if encoded.kind == 'dense':
      out[name] = tf.constant(rng.normal(size=(batch, encoded.width)),
                              tf.float32)
    else:
      out[name] = tf.constant(rng.integers(0, encoded.cardinality, batch),
                              tf.int64)
  return out


@pytest.fixture
def mixed_bfloat16():
  saved = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')
  yield
  tf.keras.mixed_precision.set_global_policy(saved)


@pytest.mark.parametrize('builder', sorted(models.BUILTINS))
def test_float32_logits_of_every_input(builder):
  model = models.BUILTINS[builder](INPUTS, 3, seed=1)
  assert sorted(model.input) == sorted(INPUTS)
  logits = model(features())
  assert logits.shape == (4, 3) and logits.dtype == tf.float32
  assert model.get_layer('logits').dtype == 'float32'


def test_dnn_layers_and_embedding_widths():
  model = models.dnn(INPUTS, 2, seed=1)
  names = [w.name.split(':')[0] for w in model.weights]
  assert names == [
      'dnn/embedding_color/embeddings', 'dnn/embedding_zip/embeddings',
      'dnn/hidden_0/kernel', 'dnn/hidden_0/bias',
      'dnn/hidden_1/kernel', 'dnn/hidden_1/bias',
      'logits/kernel', 'logits/bias']
  # color: the default min(16, ceil(6 * 5 ** 0.25)) = 9; zip: its own 4;
  # the cross is the wide part's.
  assert model.get_layer('dnn/embedding_color').output_dim == 9
  assert model.get_layer('dnn/embedding_zip').output_dim == 4
  assert model.get_layer('dnn/hidden_0').kernel.shape == (1 + 3 + 9 + 4, 128)
  assert model.get_layer('dnn/hidden_1').units == 64
  crossed = models.dnn(INPUTS, 2, embed_crosses=True, embedding_dim=6,
                       hidden_units=[8], dropout=0.5, batch_norm=True)
  assert crossed.get_layer('dnn/embedding_color_X_zip').output_dim == 6
  assert crossed.get_layer('dnn/embedding_color').output_dim == 6
  assert crossed.get_layer('dnn/dropout_0').rate == 0.5
  assert crossed.get_layer('dnn/batch_norm_0')


@pytest.mark.parametrize('builder', sorted(models.BUILTINS))
def test_names_and_weights_are_the_same_in_a_second_build(builder):
  first = models.BUILTINS[builder](INPUTS, 2, seed=7)
  second = models.BUILTINS[builder](dict(reversed(INPUTS.items())), 2, seed=7)
  assert [w.name for w in second.weights] == [w.name for w in first.weights]
  assert all(w.name.split('/')[0] in ('linear', 'dnn', 'logits')
             for w in first.weights)
  for a, b in zip(first.weights, second.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  np.testing.assert_array_equal(first(features()), second(features()))
  # An Estimator's model_fn builds in a graph: the same names key its
  # checkpoints.
  with tf.Graph().as_default():
    in_graph = models.BUILTINS[builder](INPUTS, 2, seed=7)
    assert [w.name for w in in_graph.weights] == [
        w.name for w in first.weights]


def test_inputs_may_be_the_fields_dicts():
  """model_fn's params carry the EncodedInputs as dicts."""
  as_dicts = {name: dataclasses.asdict(value)
              for name, value in INPUTS.items()}
  del as_dicts['age']['cross']  # A field left out: its default, None.
  first = models.wide_deep(INPUTS, 2, seed=3)
  second = models.wide_deep(as_dicts, 2, seed=3)
  assert [w.name for w in second.weights] == [w.name for w in first.weights]
  np.testing.assert_array_equal(first(features()), second(features()))


def test_linear_is_the_weighted_sum_of_its_inputs():
  model = models.linear(INPUTS, 2)
  # Canned LinearClassifier starts from zeros.
  assert not any(np.any(w.numpy()) for w in model.weights)
  rng = np.random.default_rng(3)
  for w in model.weights:
    w.assign(rng.normal(size=w.shape))
  x = features(batch=6)

  def weights(name):
    return model.get_layer(f'linear/weights_{name}').weights[0].numpy()

  expected = model.get_layer('logits').bias.numpy() + sum(
      x[name].numpy() @ weights(name) for name in ('age', 'scores')) + sum(
          weights(name)[x[name].numpy()]
          for name in ('color', 'zip', 'color_X_zip'))
  np.testing.assert_allclose(model(x), expected, rtol=1e-5, atol=1e-6)


def test_wide_deep_sums_a_linear_model_of_the_ids_and_a_dnn():
  model = models.wide_deep(INPUTS, 1, seed=2, hidden_units=[16, 8])
  for name in ('color', 'zip', 'color_X_zip'):
    assert model.get_layer(f'linear/weights_{name}')
  with pytest.raises(ValueError):
    model.get_layer('linear/weights_age')  # Dense inputs are the dnn's.
  parts = models.variables_by_part(model)
  assert [v.name.split(':')[0] for v in parts['linear']] == [
      'linear/weights_color/embeddings', 'linear/weights_color_X_zip/'
      'embeddings', 'linear/weights_zip/embeddings', 'linear/bias/bias']
  assert len(parts['dnn']) == 2 + 3 * 2
  # The wide part starts at zero: the logits are the dnn's.
  x = features()
  dnn_logits = tf.keras.Model(model.input,
                              model.get_layer('dnn/logits').output)(x)
  np.testing.assert_allclose(model(x), dnn_logits, rtol=1e-6)
  assert models.variables_by_part(models.dnn(INPUTS, 1))['linear'] == []
  assert models.variables_by_part(models.linear(INPUTS, 1))['dnn'] == []


def test_mixed_bfloat16_computes_in_bfloat16_with_float32_logits(
    mixed_bfloat16):
  del mixed_bfloat16
  mixed = models.wide_deep(INPUTS, 3, seed=1)
  assert {w.dtype for w in mixed.weights} == {tf.float32}
  assert mixed.get_layer('dnn/hidden_0').compute_dtype == 'bfloat16'
  assert mixed.get_layer('linear/weights_zip').compute_dtype == 'float32'
  logits = mixed(features())
  assert logits.dtype == tf.float32
  tf.keras.mixed_precision.set_global_policy('float32')
  reference = models.wide_deep(INPUTS, 3, seed=1)(features())
  assert float(tf.reduce_max(tf.abs(logits - reference))) < 0.05 * float(
      tf.reduce_max(tf.abs(reference)))


@pytest.mark.parametrize('kwargs, message', [
    (dict(hidden_units=[]), 'hidden_units'),
    (dict(hidden_units=[64, 0]), 'hidden_units'),
    (dict(dropout=1.0), 'dropout'),
    (dict(embedding_dim=0), 'embedding_dim'),
])
def test_bad_model_kwargs_are_usage_errors(kwargs, message):
  with pytest.raises(UsageError, match=message):
    models.wide_deep(INPUTS, 2, **kwargs)


def test_bad_inputs_are_usage_errors():
  with pytest.raises(UsageError, match='no input columns'):
    models.linear({}, 2)
  with pytest.raises(UsageError, match='only crosses'):
    models.dnn({'a_X_b': EncodedInput('ids', cardinality=9, cross=True)}, 2)
  with pytest.raises(UsageError, match="'sparse'"):
    models.dnn({'a': EncodedInput('sparse')}, 2)
  with pytest.raises(UsageError, match='use --model=dnn'):
    models.wide_deep({'a': EncodedInput('dense', width=2)}, 2)


@pytest.mark.parametrize('builder', sorted(models.BUILTINS))
def test_columns_that_are_no_scope_names_build_in_a_graph(builder):
  inputs = {'hours per week': EncodedInput('dense', width=1),
            '_id': EncodedInput('ids', cardinality=7)}
  with tf.Graph().as_default():
    model = models.BUILTINS[builder](inputs, 2)
    logits = model({'_id': tf.constant([1, 6], tf.int64),
                    'hours per week': tf.ones([2, 1])})
  assert logits.shape == (2, 2)
  assert sorted(model.input) == sorted(inputs)
  assert any(w.name.startswith('linear/weights_input_id/')
             for w in model.weights) == (builder != 'dnn')


def _breast_cancer():
  """sklearn's breast cancer set, encoded by a tiny stand-in of the
  Encoder: 30 standardized floats (one dense input) and 'mean radius' in 8
  quantile bins (ids), crossed with 'mean texture' in 4."""
  datasets = pytest.importorskip('sklearn.datasets')
  data = datasets.load_breast_cancer()
  x, y = data.data.astype(np.float32), data.target
  order = np.random.default_rng(0).permutation(len(y))
  x, y = x[order], y[order]
  train = slice(0, 400)
  mean, std = x[train].mean(0), x[train].std(0)

  def bins(column, count):
    edges = np.quantile(x[train, column], np.linspace(0, 1, count + 1)[1:-1])
    return np.digitize(x[:, column], edges)

  radius, texture = bins(0, 8), bins(1, 4)
  encoded = {'floats': (x - mean) / std, 'radius': radius,
             'radius_X_texture': radius * 4 + texture}
  inputs = {'floats': EncodedInput('dense', width=30),
            'radius': EncodedInput('ids', cardinality=8),
            'radius_X_texture': EncodedInput('ids', cardinality=32,
                                             cross=True)}
  return inputs, encoded, y, train, slice(400, None)


@pytest.mark.parametrize('builder', sorted(models.BUILTINS))
def test_trains_on_breast_cancer_to_better_than_chance(builder):
  inputs, encoded, y, train, test = _breast_cancer()
  model = models.BUILTINS[builder](inputs, 1, seed=0, **(
      {} if builder == 'linear' else {'hidden_units': [16, 8]}))
  model.compile(tf.keras.optimizers.Adam(0.05),
                tf.keras.losses.BinaryCrossentropy(from_logits=True))
  model.fit({k: v[train] for k, v in encoded.items()}, y[train],
            batch_size=50, epochs=2, verbose=0, shuffle=False)
  logits = model.predict({k: v[test] for k, v in encoded.items()},
                         verbose=0)[:, 0]
  accuracy = np.mean((logits > 0) == y[test])
  majority = max(np.mean(y[test]), 1 - np.mean(y[test]))
  # Well above always-the-majority (0.62 here); logistic regression on
  # these features scores ~0.97.
  assert accuracy > majority + 0.2, (accuracy, majority)


def test_an_estimator_trains_it_and_keys_its_checkpoint_by_layer_names(
    tmp_path):
  """In a model_fn, as the estimator engine builds it: the checkpoint's
  variables are the layers' names (the engine is the lead's; this is the
  model's part)."""
  tf_estimator = pytest.importorskip('tensorflow_estimator').estimator
  # numpy: the input_fn runs in Estimator's graph.
  data = {name: value.numpy() for name, value in features(batch=32).items()}
  labels = np.arange(32) % 2

  def model_fn(features, labels, mode):
    logits = models.wide_deep(INPUTS, 2, seed=0, hidden_units=[8])(features)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

  estimator = tf_estimator.Estimator(model_fn, str(tmp_path))
  estimator.train(
      lambda: tf.data.Dataset.from_tensors((data, labels)).repeat(),
      max_steps=3)
  names = {name for name, _ in tf.train.list_variables(str(tmp_path))}
  assert {'linear/weights_zip/embeddings', 'linear/bias/bias',
          'dnn/embedding_color/embeddings', 'dnn/hidden_0/kernel',
          'dnn/logits/kernel'} <= names
  assert estimator.get_variable_value('global_step') == 3
  # Trained: the wide part left its zeros.
  assert np.any(estimator.get_variable_value('linear/bias/bias'))


def test_columns_of_one_variable_name_are_a_usage_error():
  """'a b' and 'a_b' would both name layers ..._a_b: a one-line error
  naming both columns, before any layer."""
  inputs = {'a b': EncodedInput('dense', width=1),
            'a_b': EncodedInput('ids', cardinality=3)}
  with pytest.raises(UsageError, match=r"columns 'a b' and 'a_b' have the "
                     r"same variable name 'a_b'"):
    models.wide_deep(inputs, 2)


@pytest.mark.parametrize('builder', sorted(models.BUILTINS))
def test_weight_decay_covers_every_coefficient_of_the_linear_part(builder):
  """--weight_decay is L2 on the linear model's (and wide part's) weights
  of ids too, its coefficients as a number's kernel is (LogisticRegression's
  L2 covers both; only the kernels were decayed); not on biases or the
  DNN's embedding tables."""
  # pylint: disable=g-import-not-at-top
  from estimator_trainer import models as models_lib
  model = models_lib.build(builder, INPUTS, 3, seed=1, weight_decay=0.5)
  for variable in model.trainable_variables:  # The linear part starts at 0.
    variable.assign(tf.random.stateless_normal(variable.shape, (1, 2)))
  decayed = [v for v in model.trainable_variables
             if 'kernel' in v.name or v.name.startswith('linear/')
             and 'bias' not in v.name]
  assert any('embeddings' in v.name and v.name.startswith('linear/')
             for v in decayed) == (builder != 'dnn')
  expected = 0.5 * sum(float(tf.reduce_sum(tf.square(v))) for v in decayed)
  assert float(tf.add_n(model.losses)) == pytest.approx(expected, rel=1e-5)


def test_a_model_with_weight_decay_saves(tmp_path):
  """A penalty closing over its variable by a lambda's default argument
  failed tf.saved_model.save (NotEncodableError): every TF2 export of a
  model with --weight_decay did."""
  # pylint: disable=g-import-not-at-top
  from estimator_trainer import models as models_lib
  model = models_lib.build('linear', INPUTS, 3, seed=1, weight_decay=0.5)
  model(features())
  tf.saved_model.save(model, str(tmp_path / 'saved'))
  assert len(tf.saved_model.load(str(tmp_path / 'saved'))
             .trainable_variables) == len(model.trainable_variables)
