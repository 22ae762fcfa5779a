"""The census-like set and the tabular peers of scripts/benchmark.py
(--workload=census): the data, the table, and a smoke run; never timings."""

import contextlib
import csv
import dataclasses
import json
import random
import subprocess
import sys
import types

import numpy as np
import pytest

from estimator_trainer import config
from estimator_trainer import config_resolved
from estimator_trainer import model_recipe
from estimator_trainer.benchmark import census
from estimator_trainer.benchmark import measure
from estimator_trainer.benchmark import report
from estimator_trainer.benchmark import runs
from estimator_trainer.benchmark import workloads
import scripts_dir


def test_generate_is_deterministic_with_the_promised_columns():
  first, bayes = census.generate(3000, seed=5)
  second, _ = census.generate(3000, seed=5)
  for name in first:
    np.testing.assert_array_equal(first[name], second[name])
  assert list(first) == [*census.NUMBERS, *census.STRINGS, census.HASHED,
                         census.LABEL]
  for name, count in census.STRINGS.items():
    assert 2 <= count <= 40
    assert set(first[name]) <= set(census.vocabulary(name))
  assert set(first[census.LABEL]) == set(census.LABEL_VOCABULARY)
  # The label follows the features: neither a coin toss nor certain.
  assert 0.8 < bayes < 0.95
  assert len(set(first[census.HASHED])) > 2500  # Of 100,000 ids.
  for other in (census.generate(3000, seed=6)[0],
                census.generate(3000, seed=5, split='test')[0]):
    assert not np.array_equal(other['age'], first['age'])


def test_missing_cells_and_weights_leave_the_other_values_alone():
  full, _ = census.generate(2000, seed=2)
  holes, _ = census.generate(2000, seed=2, missing=0.3, weights=True)
  assert np.all(holes[census.WEIGHT] > 0)
  for name in [*census.NUMBERS, *census.STRINGS, census.HASHED]:
    empty = (np.isnan(holes[name]) if name in census.NUMBERS else
             holes[name] == '')
    assert 0.2 < np.mean(empty) < 0.4
    np.testing.assert_array_equal(holes[name][~empty], full[name][~empty])
  np.testing.assert_array_equal(holes[census.LABEL], full[census.LABEL])


def test_write_gives_the_same_rows_as_csv_and_tfrecord(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  schema = census.write(str(tmp_path), rows=120, num_shards=2, seed=1,
                        missing=0.2, weights=True)
  assert schema['rows'] == 120 and set(schema['means']) == set(
      census.NUMBERS)
  assert all(np.isfinite(list(schema['means'].values())))
  spec = json.loads((tmp_path / 'feature_spec.json').read_text())
  assert spec['columns'][census.HASHED] == {
      'kind': 'string_hashed', 'num_bins': census.HASH_BINS}
  assert spec['head'] == 'binary' and spec['weight'] == census.WEIGHT
  assert census.read_schema(str(tmp_path)) == schema
  for split, count in (('train', 120), ('test', 12)):
    rows = []
    for path in sorted(tmp_path.glob(f'{split}-*.csv')):
      with open(path) as f:
        rows += list(csv.DictReader(f))
    assert len(rows) == count
    records = tf.data.TFRecordDataset(sorted(
        str(p) for p in tmp_path.glob(f'{split}-*.tfrecord')))
    for row, record in zip(rows, records):
      example = tf.train.Example.FromString(record.numpy()).features.feature
      # An empty cell is an absent feature.
      assert sorted(example) == sorted(k for k, v in row.items() if v)
      for name, value in row.items():
        if name in census.FLOATS and value:
          assert float(value) == example[name].float_list.value[0]
        elif value:
          assert value.encode() == example[name].bytes_list.value[0]
  assert not list(tmp_path.glob('*.tmp'))


def test_census_setup_is_the_engines_flags():
  """The engines' CLI gets every setup key as a flag: the ones TrainConfig
  has, and --feature_spec (issue 34's, the lead's)."""
  setup = runs.census_setup('/data/census', 'adam', 0.002)
  fields = {field.name for field in dataclasses.fields(config.TrainConfig)}
  assert set(setup) - fields <= {'feature_spec'}
  assert setup['model'] == 'dnn'
  # What the peers do (structured data smooths no labels by default).
  assert setup['lr_decay'] == 'none' and 'label_smoothing' not in setup
  assert setup['feature_spec'] == '/data/census/feature_spec.json'
  assert setup['eval_files'] == '/data/census/test-*.tfrecord'
  assert (f'--train_files={setup["train_files"]}' in runs.command(
      'ctl_default', '/tmp/m', runs.Settings(setup=setup,
                                             mode='train_and_evaluate')))


def test_tabular_input_cut_at_each_stage(tmp_path):
  """tabular_read, tabular_parse and tabular_input iterate the engines'
  TRAIN input_fn cut after its records, their parsing, their encoding (on
  CSV: the TFRecords' parsing is the smoke run's)."""
  from estimator_trainer.benchmark import tabular_parts  # pylint: disable=g-import-not-at-top
  census.write(str(tmp_path / 'data'), rows=200, num_shards=2, seed=1)
  setup = runs.census_setup(str(tmp_path / 'data'), 'adam', 0.002,
                            file_format='csv')
  assert setup['train_files'].endswith('.csv')
  batches = {}
  for stage in ('read', 'parse', 'encode'):
    train, _, _ = tabular_parts._input(  # pylint: disable=protected-access
        setup, 8, str(tmp_path / stage), stage)
    batches[stage] = next(iter(train))
  assert batches['read'].dtype.name == 'string'
  assert batches['read'].shape == [8]
  raw, label = batches['parse']
  assert set(raw) == {*census.NUMBERS, *census.STRINGS, census.HASHED}
  assert label.shape == [8]
  name = next(iter(census.STRINGS))
  assert raw[name].dtype.name == 'string'
  features, labels = batches['encode']
  assert labels.shape[0] == 8 and features[name].dtype.name != 'string'
  # Every part's workload, run as the benchmark's subprocess would (its
  # dispatch is the peers', test_census_smoke_run's; a subprocess's RESULT
  # line test_smoke_run's): rates, no metrics.
  for config in ('tabular_input', 'tabular_parse', 'tabular_encode',
                 'tabular_step'):
    result = tabular_parts.WORKLOADS[config](setup, 4, 8, 2)
    assert result['rates'] and min(result['rates']) > 0, config
    assert 'metrics' not in result, config


def test_tabular_table_ratios_metrics_and_targets():
  runs = [
      {'config': 'canned_dnn', 'round': 0, 'examples_per_second': 100.0,
       'peak_rss_mb': 700.0, 'metrics': {'accuracy': 0.86, 'auc': 0.90}},
      {'config': 'canned_dnn', 'round': 1, 'examples_per_second': 120.0,
       'peak_rss_mb': 700.0, 'metrics': {'accuracy': 0.88, 'auc': 0.92}},
      {'config': 'fit_tabular', 'round': 0, 'examples_per_second': 200.0,
       'peak_rss_mb': 600.0, 'metrics': {'accuracy': 0.87, 'auc': 0.91}},
      {'config': 'ctl_default', 'round': 0, 'examples_per_second': 180.0,
       'peak_rss_mb': 800.0, 'metrics': {'accuracy': 0.87}},
      {'config': 'keras_default', 'error': "error: Unknown command line "
       "flag 'feature_spec'", 'peak_rss_mb': 40.0},
  ]
  rows = {row['config']: row for row in report.summarize(runs)}
  assert rows['canned_dnn']['metrics'] == {'accuracy': pytest.approx(0.87),
                                           'auc': pytest.approx(0.91)}
  assert 'gflops' not in rows['canned_dnn']
  assert rows['ctl_default']['vs_canned'] == 1.8  # Paired with round 0.
  assert rows['ctl_default']['vs_keras'] == 0.9
  table = report.format_table(list(rows.values())).splitlines()
  assert table[0].split() == ['configuration', 'examples/s', 'range', 'vs',
                              'canned', 'vs', 'keras', 'peak', 'RSS', 'MB',
                              'accuracy', 'AUC']
  assert table[4].split()[-2:] == ['0.8700', '-']
  assert "flag 'feature_spec'" in table[5]
  assert report.target_lines(list(rows.values())) == [
      'target ctl_default: 1.80x canned (>= 1.0x) met',
      'target ctl_default: 0.90x fit_tabular (>= 0.95x) NOT met']


@contextlib.contextmanager
def _global_seeds_put_back():
  """Around fit's workloads, which call tf.keras.utils.set_random_seed: a
  test after them in this process finds Python's, NumPy's, TensorFlow's and
  Keras's global generators as they were."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  keras_seeds = tf.keras.utils.set_random_seed.__globals__[
      'backend']._SEED_GENERATOR
  saved = (random.getstate(), np.random.get_state(), context.global_seed(),
           getattr(keras_seeds, 'generator', None))
  try:
    yield
  finally:
    random.setstate(saved[0])
    np.random.set_state(saved[1])
    tf.random.set_seed(saved[2])
    keras_seeds.generator = saved[3]  # Keras reads None as unset.


@pytest.mark.slow
@pytest.mark.estimator
# Keras 2.15's initializers, unseeded in fit_tabular's plain model, draw a
# seed with random.randint(1, 1e9).
@pytest.mark.filterwarnings('ignore:non-integer arguments to randrange')
def test_census_smoke_run(tmp_path):
  """One run of the script, --workload=census_wide_deep on the set it
  writes: the keras engine's wide & deep (FTRL + Adagrad) trains and
  evaluates in its subprocess (the engines' census flags, their metrics
  read back); the table has its row with accuracy and AUC. The peers run in
  this process through `workloads.run`, the dispatch their subprocess runs
  (its RESULT line is test_smoke_run's fit_default's), on the set the
  script wrote (a process each would add a TensorFlow import, not a path):
  the canned DNNLinearCombinedClassifier, which the keras row gets a ratio
  and a target against as in the script (`report`); on the census
  workload's setup, fit_tabular, fit_package_dnn (fit_tabular's with the
  package's model) and canned_dnn. The engines' parts are
  test_tabular_input_cut_at_each_stage's; the other ratios and targets
  test_tabular_table_ratios_metrics_and_targets's."""
  output = tmp_path / 'result.json'
  result = subprocess.run(
      [sys.executable, str(scripts_dir.SCRIPTS / 'benchmark.py'),
       '--workload=census_wide_deep', '--census_rows=2000',
       '--optimizer=adagrad', '--learning_rate=0.05', '--batch_size=64',
       '--steps=24', '--summary_steps=6', '--configs=keras_default',
       f'--json_output={output}', f'--work_dir={tmp_path / "work"}'],
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.strip().splitlines()
  assert lines[0].startswith('census-like set (2,000 train, 200 test rows')
  assert 'adagrad 0.05' in lines[0], lines[0]
  assert [line.split()[0] for line in lines[3:]] == ['keras_default']
  ran = json.loads(output.read_text())['runs']
  census_dir = str(tmp_path / 'work/census_data')
  setups = {
      'canned_wide_deep': runs.census_setup(census_dir, 'adagrad', 0.05,
                                            wide_deep=True),
      # The census workload's, at the script's defaults: Adam at 2e-3.
      **dict.fromkeys(['fit_tabular', 'fit_package_dnn', 'canned_dnn'],
                      runs.census_setup(census_dir, 'adam', 2e-3))}
  peers = []
  for name, setup in setups.items():
    with _global_seeds_put_back():
      peer = workloads.run(runs.CONFIGS[name][0], setup, 'default', steps=24,
                           batch_size=64, every_steps=6, cpu_replicas=0)
    # A run in this process has no peak RSS of its own.
    peers.append({'config': name, 'round': 0, 'peak_rss_mb': 0.0,
                  'examples_per_second': measure.steady_rate(peer['rates']),
                  **peer})
  for row in ran + peers:
    assert row['examples_per_second'] > 0, row
    # 24 steps of 64 learn something: better than a coin, worse than Bayes.
    assert 0.5 < row['metrics']['auc'] < 1, row
    assert 0 < row['metrics']['accuracy'] < 1, row
  # The wide & deep workload's table, as the script makes it.
  rows = {row['config']: row for row in report.summarize(
      ran + [peer for peer in peers if peer['config'] == 'canned_wide_deep'])}
  assert rows['keras_default']['vs_canned'] > 0
  assert any(line.startswith('target keras_default: ') for line in
             report.target_lines(list(rows.values())))


@pytest.mark.parametrize('wide_deep', [False, True])
def test_the_engines_train_the_peers_network(tmp_path, wide_deep):
  """The census rows compare the engines with canned's and plain Keras's
  network and objective: the setup's flags leave out the structured
  recipe's periodic embedding and L2 (they had given them, unsaid)."""
  setup = runs.census_setup('/data/census', 'adam', 2e-3, wide_deep=wide_deep)
  built = model_recipe.resolved(config.TrainConfig(
      model_dir=str(tmp_path), model=setup['model'],
      model_kwargs=setup.get('model_kwargs'),
      weight_decay=setup.get('weight_decay')))
  assert built.model_kwargs == {'numeric_embedding': False}
  # A spec whose deep L2 the recipe would take without the flag.
  spec = types.SimpleNamespace(deep_weight_decay=0.01)
  assert config_resolved.weight_decay_of(built, spec) == 0.0


def test_census_wide_deep_setup_gives_the_wide_part_ftrl():
  setup = runs.census_setup('/data/census', 'adagrad', 0.05, wide_deep=True)
  assert setup['model'] == 'wide_deep'
  assert setup['linear_optimizer'] == 'ftrl'
  assert setup['linear_learning_rate'] == runs.WIDE_LEARNING_RATE
  assert set(runs.WORKLOADS['census_wide_deep']) == {
      'estimator_default', 'ctl_default', 'keras_default', 'canned_wide_deep'}
  fields = {field.name for field in dataclasses.fields(config.TrainConfig)}
  assert set(setup) - fields <= {'feature_spec'}
