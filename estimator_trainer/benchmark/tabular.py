"""The tabular peers of issue 34 on the census-like set (`census`), as
their users write them: the canned `tf.estimator.DNNClassifier` on feature
columns (TensorFlow 2.15) and plain Keras (preprocessing layers in
tf.data, `Model.fit`); and the package's `models.tabular.dnn` in that
plain Keras pipeline (`fit_package_dnn`: the model's share of what the
engines measure).

All: MLP `HIDDEN_UNITS`, the same embedding widths
(`models.default_embedding_dim` of each column's ids, 16 for the hashed
id), setup's `optimizer` (adam or adagrad) at its `learning_rate`, the
same TFRecords read in the same order (shuffle buffer and seed: the
engines', `census.SHUFFLE_BUFFER` and `census.SEED`). Each returns the
interval rates of `steps` training steps and `metrics` (accuracy and AUC
on the whole test split, after training; not timed).

`setup`: the engines' flags (`runs.census_setup`): the set's
`feature_spec` (census.json beside it), `train_files`, `eval_files`,
`optimizer` and `learning_rate`; `model` is ignored.
"""

import functools
import os
import tempfile

from estimator_trainer.benchmark import census
from estimator_trainer.benchmark.measure import IntervalTimer
from estimator_trainer.models import tabular as models

HIDDEN_UNITS = models.HIDDEN_UNITS
# Adam: the package's default. Adagrad: the canned DNNClassifier's (at
# 0.05); its sparse update touches only the looked-up rows of an embedding,
# where Adam's decays every row of its moments each step.


def _optimizer(setup, legacy):
  """setup's optimizer: Keras's legacy class (what canned Estimators
  take) or its current one."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  module = tf.keras.optimizers.legacy if legacy else tf.keras.optimizers
  kind = {'adam': module.Adam, 'adagrad': module.Adagrad}[setup['optimizer']]
  return kind(setup['learning_rate'])


def _schema(setup):
  return census.read_schema(os.path.dirname(setup['feature_spec']))


def _parse_spec(schema):
  """A missing feature (census --missing) parses as 0.0 or ''."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = {name: tf.io.FixedLenFeature([], tf.float32, default_value=0.0)
          for name in schema['numbers']}
  for name in [*schema['strings'], schema['hashed']]:
    spec[name] = tf.io.FixedLenFeature([], tf.string, default_value='')
  spec[schema['label']] = tf.io.FixedLenFeature([], tf.string)
  return spec


def _dataset(setup, split, batch_size, training):
  """Batches of parsed tf.Examples: (features, raw label). Training:
  shuffled, repeated, whole batches; else one pass."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  schema = _schema(setup)
  files = sorted(tf.io.gfile.glob(
      setup['train_files' if split == 'train' else 'eval_files']))
  dataset = tf.data.TFRecordDataset(files)
  if training:
    dataset = dataset.shuffle(census.SHUFFLE_BUFFER,
                              seed=census.SEED).repeat()
  spec = _parse_spec(schema)

  def parse(records):
    features = tf.io.parse_example(records, spec)
    return features, features.pop(schema['label'])

  return dataset.batch(batch_size, drop_remainder=training).map(
      parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _embedding_dims(schema):
  """Column -> embedding width: the package's default of its ids'
  cardinality (a vocabulary's values + 1 out-of-vocabulary id)."""
  dims = {name: models.default_embedding_dim(len(vocabulary) + 1)
          for name, vocabulary in schema['strings'].items()}
  dims[schema['hashed']] = models.default_embedding_dim(schema['hash_bins'])
  return dims


def _canned_columns(schema):
  """The feature columns equivalent to the feature spec: numeric_column
  normalized by the train split's mean and variance; the categorical
  columns (vocabulary lists and the hash bucket); embedding_columns of
  those for a DNN."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  fc = tf.feature_column
  numbers = []
  for name in schema['numbers']:
    mean, std = schema['means'][name], schema['variances'][name] ** 0.5
    numbers.append(fc.numeric_column(
        name, normalizer_fn=lambda x, m=mean, s=std: (x - m) / s))
  categorical = {name: fc.categorical_column_with_vocabulary_list(
      name, vocabulary) for name, vocabulary in schema['strings'].items()}
  categorical[schema['hashed']] = fc.categorical_column_with_hash_bucket(
      schema['hashed'], schema['hash_bins'])
  dims = _embedding_dims(schema)
  embedded = [fc.embedding_column(column, dims[name])
              for name, column in categorical.items()]
  return numbers, list(categorical.values()), embedded


def _run_canned(setup, steps, batch_size, every_steps, make_estimator):
  """Trains and evaluates `make_estimator(model_dir, run_config)`; timed by
  a hook."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  timer = IntervalTimer(batch_size, every_steps)

  class TimerHook(tf.compat.v1.train.SessionRunHook):

    def after_run(self, run_context, run_values):
      timer.step()

  with tempfile.TemporaryDirectory() as model_dir:
    estimator = make_estimator(model_dir, tf.estimator.RunConfig(
        tf_random_seed=census.SEED, save_summary_steps=every_steps))
    estimator.train(lambda: _dataset(setup, 'train', batch_size, True),
                    max_steps=steps, hooks=[TimerHook()])
    result = estimator.evaluate(
        lambda: _dataset(setup, 'test', batch_size, False))
  return {'rates': timer.rates,
          'metrics': {'accuracy': float(result['accuracy']),
                      'auc': float(result['auc'])}}


def run_canned_dnn(setup, steps, batch_size, every_steps):
  """tf.estimator.DNNClassifier on the equivalent feature columns: the
  numbers and an embedding of each categorical column."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  numbers, _, embedded = _canned_columns(_schema(setup))
  return _run_canned(
      setup, steps, batch_size, every_steps,
      lambda model_dir, config: tf.estimator.DNNClassifier(
          hidden_units=list(HIDDEN_UNITS), feature_columns=numbers + embedded,
          label_vocabulary=_schema(setup)['label_vocabulary'],
          optimizer=lambda: _optimizer(setup, legacy=True),
          model_dir=model_dir, config=config))


def run_canned_wide_deep(setup, steps, batch_size, every_steps):
  """tf.estimator.DNNLinearCombinedClassifier: the linear part on the
  categorical columns with FTRL at setup's `linear_learning_rate`, the
  DNN part as canned_dnn's with setup's optimizer."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  numbers, categorical, embedded = _canned_columns(_schema(setup))
  return _run_canned(
      setup, steps, batch_size, every_steps,
      lambda model_dir, config: tf.estimator.DNNLinearCombinedClassifier(
          linear_feature_columns=categorical,
          linear_optimizer=lambda: tf.keras.optimizers.legacy.Ftrl(
              setup['linear_learning_rate']),
          dnn_feature_columns=numbers + embedded,
          dnn_hidden_units=list(HIDDEN_UNITS),
          dnn_optimizer=lambda: _optimizer(setup, legacy=True),
          label_vocabulary=_schema(setup)['label_vocabulary'],
          model_dir=model_dir, config=config))


def _plain_model(schema, cardinality):
  """What a Keras user writes: an Embedding per column (Keras's default
  initializer), concatenated with the numbers, Dense layers."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  layers = tf.keras.layers
  dims = _embedding_dims(schema)
  inputs = {name: tf.keras.Input((), name=name, dtype='int64')
            for name in cardinality}
  inputs['numbers'] = tf.keras.Input((len(schema['numbers']),),
                                     name='numbers')
  pieces = [inputs['numbers']] + [
      layers.Embedding(cardinality[name], dims[name])(inputs[name])
      for name in cardinality]
  x = layers.Concatenate()(pieces)
  for units in HIDDEN_UNITS:
    x = layers.Dense(units, activation='relu')(x)
  return tf.keras.Model(inputs, layers.Dense(1)(x))


def _package_model(schema, cardinality):
  """The package's `models.tabular.dnn` on the same encoded inputs (given
  as the Encoder's EncodedInput fields)."""
  inputs = {name: {'kind': 'ids', 'cardinality': count}
            for name, count in cardinality.items()}
  inputs['numbers'] = {'kind': 'dense', 'width': len(schema['numbers'])}
  return models.dnn(inputs, 1, seed=census.SEED)


def run_fit_tabular(setup, steps, batch_size, every_steps,
                    package_model=False):
  """Plain Keras: Normalization, StringLookup and Hashing layers mapped
  over the parsed batches in tf.data, an Embedding per column, Dense
  layers, `Model.fit`; timed by a batch callback. `package_model`: the
  package's `dnn` in place of the plain model."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  schema = _schema(setup)
  layers = tf.keras.layers
  tf.keras.utils.set_random_seed(census.SEED)
  numbers = {name: layers.Normalization(
      axis=None, mean=schema['means'][name],
      variance=schema['variances'][name]) for name in schema['numbers']}
  lookups = {name: layers.StringLookup(vocabulary=vocabulary)
             for name, vocabulary in schema['strings'].items()}
  lookups[schema['hashed']] = layers.Hashing(schema['hash_bins'])
  cardinality = {name: len(vocabulary) + 1
                 for name, vocabulary in schema['strings'].items()}
  cardinality[schema['hashed']] = schema['hash_bins']
  label_lookup = layers.StringLookup(
      vocabulary=schema['label_vocabulary'], num_oov_indices=0)

  def preprocess(features, label):
    encoded = {name: lookup(features[name])
               for name, lookup in lookups.items()}
    encoded['numbers'] = tf.stack(
        [numbers[name](features[name]) for name in schema['numbers']], 1)
    return encoded, tf.cast(label_lookup(label), tf.float32)

  def dataset(split, training):
    return _dataset(setup, split, batch_size, training).map(
        preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE)

  model = (_package_model if package_model else _plain_model)(
      schema, cardinality)
  model.compile(
      optimizer=_optimizer(setup, legacy=False),
      loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
      metrics=[tf.keras.metrics.BinaryAccuracy(threshold=0.0),
               tf.keras.metrics.AUC(from_logits=True, name='auc')])
  timer = IntervalTimer(batch_size, every_steps)
  # A batch-end callback that wants numpy logs makes fit wait for every
  # step, as a session.run per step does.
  callback = tf.keras.callbacks.LambdaCallback(
      on_train_batch_end=lambda batch, logs: timer.step())
  model.fit(dataset('train', True), epochs=1, steps_per_epoch=steps,
            callbacks=[callback], verbose=0)
  result = model.evaluate(dataset('test', False), verbose=0,
                          return_dict=True)
  return {'rates': timer.rates,
          'metrics': {'accuracy': float(result['binary_accuracy']),
                      'auc': float(result['auc'])}}


WORKLOADS = {'canned_dnn': run_canned_dnn,
             'canned_wide_deep': run_canned_wide_deep,
             'fit_tabular': run_fit_tabular,
             'fit_package_dnn': functools.partial(run_fit_tabular,
                                                  package_model=True)}
