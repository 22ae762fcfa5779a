"""A canned Estimator's model_dir carried over (tf2/canned.py, migrate
--from): trained by canned code on columns of every kind, the carried
model's served predictions are canned's own on the whole eval set."""

import logging
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.tools import saved_model_utils  # saved_model_cli's reader

from estimator_trainer import engines
from estimator_trainer.config import TrainConfig
from estimator_trainer.tabular import feature_columns
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tf2 import canned_settings
from estimator_trainer.tf2 import migration
import tabular_sets

# One worker trains the canned models and carries them once.
pytestmark = [pytest.mark.estimator, pytest.mark.xdist_group('canned_migrate')]
fc = tf.feature_column
ROWS, EVAL_ROWS, STEPS = 320, 64, 30
TOLERANCE = 1e-5


def _table(rng, rows):
  table = {
      'age': rng.uniform(18, 80, rows).astype(np.float32),
      'hours': rng.uniform(0, 60, rows).astype(np.float32),
      # Sorts after 'hours' by feature name, before 'hours_bucketized_...'
      # by canned's column name: the DNN input rows' orders differ.
      'hours_a': rng.uniform(0, 1, rows).astype(np.float32),
      'color': rng.choice(['red', 'green', 'blue', 'pink', 'teal'], rows),
      'size': rng.choice([1, 2, 3, 7], rows).astype(np.int64),
      # 5 and 6 out of the identity column's range: its default_value.
      'slot': rng.integers(0, 7, rows).astype(np.int64),
      'city': rng.choice(['rome', 'paris', 'oslo', 'lima'], rows),
      'zone': rng.integers(0, 40, rows).astype(np.int64),
  }
  score = ((table['age'] - 45) / 20 + (table['color'] == 'red') +
           table['hours_a'] -
           (table['size'] == 2) + (table['hours'] > 30) * 0.7)
  table['y'] = (score + rng.normal(0, 0.5, rows) > 0.2).astype(np.int64)
  # Of a few units: float32's rounding of hundreds would be ~1e-5.
  table['price'] = (score * 2 + 3).astype(np.float32)
  return table


def _columns(vocabulary_file):
  # (A cross of an integer feature would parse it as a string in canned's
  # serving, beside its hashed column's int64: canned cannot export that.)
  color = fc.categorical_column_with_vocabulary_list(
      'color', ['red', 'green', 'blue'], num_oov_buckets=2)
  size = fc.categorical_column_with_vocabulary_list('size', [3, 1, 2],
                                                    dtype=tf.int64)
  # 'lima' and slots 5, 6 take the default_value ids.
  city = fc.categorical_column_with_vocabulary_file('city', vocabulary_file,
                                                    default_value=1)
  slot = fc.categorical_column_with_identity('slot', 5, default_value=4)
  zone = fc.categorical_column_with_hash_bucket('zone', 16, dtype=tf.int64)
  hours = fc.bucketized_column(fc.numeric_column('hours'), [10., 30., 45.])
  age = fc.numeric_column('age')
  # One feature as a number and bucketized (the spec's age_bucketized).
  age_buckets = fc.bucketized_column(age, [30., 50., 65.])
  linear = [age, age_buckets, hours, color, size, slot, city, zone,
            fc.crossed_column(['color', 'city'], 24)]
  dnn = [age, fc.indicator_column(age_buckets), fc.numeric_column('hours_a'),
         fc.embedding_column(color, 3, combiner='sqrtn'),
         fc.indicator_column(size), fc.embedding_column(zone, 2),
         fc.embedding_column(hours, 2), fc.indicator_column(slot),
         fc.embedding_column(city, 2, combiner='sum')]
  return linear, dnn


def _wide_deep(e, linear, dnn, model_dir, **kwargs):
  # The package's wide part takes ids: the numeric column is the deep's.
  return e.DNNLinearCombinedClassifier(
      model_dir, linear_feature_columns=[c for c in linear
                                         if c.name != 'age'],
      dnn_feature_columns=dnn, dnn_hidden_units=[8, 4], **kwargs)


# canned name -> (its Estimator of (tf.estimator, linear columns, deep
# columns, model_dir, its keyword arguments), its columns, its label).
CANNED = {
    'LinearClassifier': (lambda e, lin, dnn, d, **kw: e.LinearClassifier(
        lin, d, optimizer='Ftrl', **kw), 'linear', 'y'),
    'DNNClassifier': (lambda e, lin, dnn, d, **kw: e.DNNClassifier(
        [8, 4], dnn, d, optimizer='Adagrad', **kw), 'dnn', 'y'),
    'DNNClassifier-Adam': (lambda e, lin, dnn, d, **kw: e.DNNClassifier(
        [8, 4], dnn, d, optimizer='Adam', **kw), 'dnn', 'y'),
    'DNNRegressor': (lambda e, lin, dnn, d, **kw: e.DNNRegressor(
        [8], dnn, d, optimizer='Adagrad', **kw), 'dnn', 'price'),
    # Its default optimizers: FTRL for the wide part, Adagrad the deep.
    'DNNLinearCombinedClassifier': (_wide_deep, 'both', 'y'),
}


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('canned')
  rng = np.random.default_rng(7)
  train, test = _table(rng, ROWS), _table(rng, EVAL_ROWS)
  for name, table in (('train', train), ('eval', test)):
    tabular_sets._write_csv(directory / f'{name}.csv', table)  # pylint: disable=protected-access
  (directory / 'cities.txt').write_text('rome\nparis\noslo\n')
  return directory, train, test


def _features(table):
  return {k: v for k, v in table.items() if k not in ('y', 'price')}


def _input_fn(table, label, repeat):
  return lambda: tf.data.Dataset.from_tensor_slices(
      (_features(table), table[label])).batch(32).repeat(repeat)


def _served(export_dir, table, output):
  serve = tf.saved_model.load(str(export_dir)).signatures['predict']
  served = serve(examples=tf.constant(tabular_sets.examples(
      _features(table))))
  return served[output].numpy()


def _export(model_dir):
  exports = sorted((pathlib.Path(model_dir) / 'export').glob('*/*'))
  assert len(exports) == 1, exports
  return exports[0]


@pytest.fixture(scope='module')
def canned_runs(data, tmp_path_factory):
  """canned name -> (its model_dir, spec file, head, canned's predictions
  of the eval set), trained on first use."""
  directory, train, test = data
  done = {}

  def run(canned):
    if canned not in done:
      make, model, label = CANNED[canned]
      linear, dnn = _columns(str(directory / 'cities.txt'))
      head = 'regression' if label == 'price' else 'binary'
      model_dir = tmp_path_factory.mktemp(canned)
      estimator = make(tf.estimator, linear, dnn, str(model_dir / 'canned'),
                       config=tf.estimator.RunConfig(tf_random_seed=1))
      estimator.train(_input_fn(train, label, None), steps=STEPS)
      output = 'predictions' if head == 'regression' else 'probabilities'
      predicted = np.array([p[output] for p in estimator.predict(
          _input_fn(test, label, 1))])
      columns = {'linear': linear, 'dnn': dnn, 'both': linear[1:] + dnn}[
          model]
      estimator.export_saved_model(
          str(model_dir / 'canned_export'),
          tf.estimator.export.build_parsing_serving_input_receiver_fn(
              fc.make_parse_example_spec(columns)))
      spec = feature_columns.feature_spec_from_columns(
          columns, label, head=head)
      spec_file = model_dir / 'spec.json'
      spec_file.write_text(spec_lib.to_json(spec))
      done[canned] = (model_dir, spec_file, head, output, predicted)
    return done[canned]

  return run


def _config(model_dir, data_dir, spec_file, head, **flags):
  return TrainConfig(
      model_dir=str(model_dir), train_files=str(data_dir / 'train.csv'),
      eval_files=str(data_dir / 'eval.csv'), feature_spec=str(spec_file),
      head=head, **{'lr_decay': 'none', 'shuffle_buffer': 0, **flags})


@pytest.fixture(scope='module')
def carried(data, canned_runs, tmp_path_factory):
  """carried(canned, engine) -> the export of canned's model_dir carried
  over (migrate's convert) and exported by `engine`, made on first use."""
  directory = data[0]
  done = {}

  def carry(canned, engine):
    if (canned, engine) not in done:
      model_dir, spec_file, head, _, _ = canned_runs(canned)
      to = tmp_path_factory.mktemp(f'{canned}-{engine}') / 'carried'
      migration.convert(_config(to, directory, spec_file, head, engine='ctl'),
                        str(model_dir / 'canned'),
                        estimator_engine=engine == 'estimator')
      engines.ENGINES[engine].run(_carried_config(
          model_dir, to, directory, spec_file, head, engine, mode='export'))
      done[canned, engine] = _export(to)
    return done[canned, engine]

  return carry


# Not keras: migrate carries for it as for ctl, and its --mode=export is
# ctl's function (controller.engine_modes' export.export).
@pytest.mark.slow
@pytest.mark.parametrize('canned', sorted(CANNED))
@pytest.mark.parametrize('engine', ['estimator', 'ctl'])
def test_carried_model_serves_canned_predictions(estimator, data, canned_runs,
                                                 carried, canned, engine):
  del estimator  # The fixture: skips without tf.estimator.
  _, output, predicted = canned_runs(canned)[2:]
  served = _served(carried(canned, engine), data[2], output)
  worst = float(np.abs(served - predicted).max())
  print(f'{canned} carried, {engine}, TF {tf.__version__}: max |served - '
        f'canned| {worst:.2e}')
  assert worst <= TOLERANCE


def _carried_config(model_dir, to, directory, spec_file, head, engine,
                    **flags):
  checkpoint = tf.train.latest_checkpoint(str(model_dir / 'canned'))
  settings = canned_settings.read(tf.train.load_checkpoint(checkpoint),
                                  checkpoint).config_values()
  return _config(to, directory, spec_file, head, engine=engine,
                 **{**settings, **flags})


# One more step after the carry (every optimizer and its slots, the label's
# units, both engines, and on the TensorFlow 2.21 stack) is
# test_canned_settings.py's: every weight equals canned's own next step's.


def _signatures(directory):
  """signature name -> (method, {input key: dtype}, {output key: dtype}),
  read where `saved_model_cli show --all` reads them: the SavedModel's
  serving MetaGraphDef."""
  meta_graph = saved_model_utils.get_meta_graph_def(str(directory), 'serve')
  shown = {}
  for name, signature in meta_graph.signature_def.items():
    if name == '__saved_model_init_op':
      continue
    shown[name] = (signature.method_name, *(
        {key: tf.dtypes.as_dtype(info.dtype).name
         for key, info in side.items()}
        for side in (signature.inputs, signature.outputs)))
  return shown


@pytest.mark.slow
@pytest.mark.parametrize('canned', sorted(CANNED))
@pytest.mark.parametrize('engine', ['estimator', 'ctl'])
def test_the_same_serving_contract(estimator, canned_runs, carried, canned,
                                   engine):
  """A canned export and the package's export of the carried model:
  the same signature names, input and output keys and dtypes, as
  saved_model_cli shows them (read from the same MetaGraphDef), and
  methods: every engine's (issue 74, item 4: the TF2 engines' had no
  classify or regress signatures, their serving_default predict's)."""
  del estimator
  model_dir = canned_runs(canned)[0]
  theirs = _signatures(next((model_dir / 'canned_export').iterdir()))
  ours = _signatures(carried(canned, engine))
  assert {'predict', 'serving_default'} <= set(theirs)
  for name in theirs:
    assert ours.get(name) == theirs[name], (name, ours.get(name), theirs[name])


def test_migrate_logs_what_it_reads_and_writes_not_a_training_plan(
    estimator, data, canned_runs, tmp_path, caplog):
  """Issue 75, item 3: `migrate --engine=estimator` logged the Config line
  of a run (`engine ctl`, a 2,000-step plan) for a command that trains
  nothing."""
  del estimator
  model_dir, spec_file, head = canned_runs('LinearClassifier')[:3]
  to = tmp_path / 'carried'
  with caplog.at_level(logging.INFO):
    migration.convert(_config(to, data[0], spec_file, head, engine='ctl'),
                      str(model_dir / 'canned'), estimator_engine=True)
  lines = [record.getMessage() for record in caplog.records]
  assert not [line for line in lines if line.startswith('Config: ')], lines
  checkpoint = tf.train.latest_checkpoint(str(model_dir / 'canned'))
  assert (f"Migrate: reading {checkpoint} (a canned Estimator's); writing "
          f"the estimator engine's checkpoint into {to}") in lines
  assert any(line.startswith(f'Carried {checkpoint} over to {to}/')
             for line in lines), lines
