"""Structured data end to end (issue 34): each head through every engine on
scikit-learn's bundled datasets and a census-like set, written here to CSV
and TFRecords; canned-Estimator metrics, engines agreeing, weights in the
loss and the metrics, 1 vs 2 replicas, the export served and its
signatures as docs/guide/export.md's tables give them, the migration to
ctl and a resume on changed data."""

import csv
import dataclasses
import json
import logging
import pathlib
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
# saved_model_cli's reader.
from tensorflow.python.tools import saved_model_utils
import yaml

from estimator_trainer import engines
from estimator_trainer import heads
from estimator_trainer import models
from estimator_trainer import stack
from estimator_trainer import weights as weights_lib
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import dataset as tabular_dataset
from estimator_trainer.tabular import statistics
from estimator_trainer.tf2 import migration
import cli_config
import engine_params
import kept_output
import tabular_sets
import warm_process
from tabular_sets import examples
from test_engines import _summary_values

# One xdist worker trains the module's shared runs (`trained`) once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group('tabular_runs')]


@pytest.fixture(scope='module')
def sets(tmp_path_factory):
  """name -> tabular_sets.Set."""
  return tabular_sets.write(tmp_path_factory.mktemp('tabular'))


# --- Runs, each trained once and shared by the tests ------------------------

# name -> (its Set, its flags beyond the Set's).
RUNS = {'binary': ('binary', {}), 'multiclass': ('multiclass', {}),
        'regression': ('regression', {}),
        'huber': ('regression', {'huber_delta': 0.5}),
        'multilabel': ('multilabel', {}),
        # Binary's data, its columns named as users name them.
        'users_names': ('users_names', {})}
# Unshuffled, so that every engine trains on the same batches whatever the
# shuffle (one order in every engine since issue 72's item 4; before it,
# graph and eager drew two); a small model, a high rate; no L2 (the deep
# models' default since issue 72 is a penalty the example weights do not
# scale: the invariance tests' tripled weights would not triple the step).
# Canned's network, without the numbers' periodic embeddings (a new run's
# default since issue 72): at this rate, without L2, one of their 1-D relu
# units crossed 0 on an example by step 8 in one engine and not the other
# (the engines equal at step 2, 2e-7 apart at 5: graph and eager sum in
# other orders), and the huber run's loss ended 0.35 % apart.
# test_tabular_engines_agree compares the engines on the recipe's runs.
FLAGS = {'model': 'dnn', 'model_kwargs': {'hidden_units': [16, 8],
                                          'numeric_embedding': False},
         'global_batch_size': 16, 'train_steps': 40, 'shuffle_buffer': 0,
         'learning_rate': 0.02, 'lr_decay': 'none', 'weight_decay': 0.0}


def config(model_dir, data, **flags):
  return TrainConfig(model_dir=str(model_dir), train_files=data.train_files,
                     eval_files=data.eval_files,
                     feature_spec=data.feature_spec, **flags)


def metrics(model_dir):
  return json.loads((pathlib.Path(model_dir) / 'metrics.json').read_text())


# The runs whose export a test reads: every Estimator's and ctl's; of
# keras's, whose export is ctl's code (tf2/export.py), the served tests'
# and each head's (test_the_export_pages_signatures_are_the_exports').
KERAS_SERVED = ('binary', 'regression', 'users_names')
KERAS_EXPORTED = (*KERAS_SERVED, 'multiclass', 'multilabel')


@pytest.fixture(scope='module')
def trained(sets, tmp_path_factory):
  """trained(run, engine) -> the model_dir of RUNS[run] trained by `engine`
  (train_and_evaluate; exported if a test serves it), trained on first
  use."""
  done = {}

  def train(name, engine):
    if (name, engine) not in done:
      data, flags = RUNS[name]
      model_dir = tmp_path_factory.mktemp(f'{name}_{engine}')
      served = engine != 'keras' or name in KERAS_EXPORTED
      engines.ENGINES[engine].run(config(
          model_dir, sets[data], engine=engine,
          export='final' if served else 'none', **FLAGS, **flags))
      done[name, engine] = model_dir
    return done[name, engine]

  return train


# What canned Estimators' heads report, and what metrics.json has beside.
CANNED = {
    'binary': {'accuracy', 'auc', 'auc_precision_recall', 'precision',
               'recall', 'label/mean', 'prediction/mean', 'average_loss'},
    'multiclass': {'accuracy', 'average_loss'},
    'regression': {'average_loss', 'mean_absolute_error',
                   'root_mean_squared_error', 'label/mean',
                   'prediction/mean'},
    'multilabel': {'average_loss', 'auc', 'auc/cultivar_0', 'auc/cultivar_1',
                   'auc/cultivar_2', 'auc/strong'}}
ALSO = {'loss', 'batch_mean_loss', 'global_step', 'num_examples'}


def _label(data):
  """The eval split's labels as the head sees them (classes: ids)."""
  spec, rows = data.spec, data.eval_rows
  if spec['head'] == 'multilabel':
    return np.stack([rows[name] for name in spec['label']], axis=1)
  label = rows[spec['label']]
  if spec.get('label_vocabulary'):
    return np.array([spec['label_vocabulary'].index(v) for v in label])
  return label


@pytest.mark.both_stacks
@pytest.mark.parametrize('engine', engine_params.ENGINES)
@pytest.mark.parametrize('name', RUNS)
def test_each_head_reports_the_canned_metrics_weighted(trained, sets, name,
                                                        engine):
  data = sets[RUNS[name][0]]
  result = metrics(trained(name, engine))
  head = data.spec['head']
  assert set(result) == CANNED[head] | ALSO
  assert result['global_step'] == FLAGS['train_steps']
  weight = data.eval_rows['w'].astype(np.float64)
  label = _label(data)
  # num_examples counts examples: the weights weigh them.
  assert result['num_examples'] == len(weight)
  if 'label/mean' in result:
    assert result['label/mean'] == pytest.approx(
        np.sum(weight * label) / np.sum(weight), rel=1e-5)
  # Better than knowing the labels' distribution alone.
  if head in ('binary', 'multiclass'):
    assert result['accuracy'] > max(np.bincount(label, weight)) / sum(weight)
  if head == 'binary':
    assert result['auc'] > 0.9
  if head == 'multilabel':
    assert min(result[f'auc/{n}'] for n in data.spec['label']) > 0.8
  if head == 'regression':
    spread = np.sqrt(np.cov(label, aweights=weight))
    assert result['root_mean_squared_error'] < spread


def _worst(a, b):
  """The largest relative difference of a metric of `a` from `b`'s."""
  return max(abs(a[k] - v) / max(abs(v), 1e-3) for k, v in b.items())


@pytest.mark.parametrize('name', RUNS)
def test_engines_agree(trained, name):
  """ctl and keras run the same eager ops on the same batches (measured:
  equal). Estimator the same steps in a graph, unshuffled so on the same
  batches: float32 rounding in another order over 40 Adam steps, measured
  at most 7e-6 (shuffled, test_tabular_engines_agree's default runs)."""
  ctl, keras = (metrics(trained(name, engine)) for engine in ('ctl', 'keras'))
  print(f'{name}: keras vs ctl {_worst(keras, ctl):.1e}')
  for key, value in ctl.items():
    assert keras[key] == pytest.approx(value, rel=1e-6, abs=1e-7), key
  if not stack.has_estimator():
    return
  estimator = metrics(trained(name, 'estimator'))
  print(f'{name}: estimator vs ctl {_worst(estimator, ctl):.1e}')
  for key, value in ctl.items():
    assert estimator[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


# --- The export, served ------------------------------------------------------


def export_dir(model_dir):
  exports = sorted((pathlib.Path(model_dir) / 'export' / 'final').iterdir())
  assert len(exports) == 1, exports
  return exports[0]


def _raw(data, engine):
  """The eval split's features as the raw signature of `engine`'s export
  takes them: keyed by the column names (TF2 engines: their
  signature_key)."""
  dtypes = {'float': tf.float32, 'integer': tf.int64, 'string': tf.string}
  key = (lambda name: name) if engine == 'estimator' else (
      tabular_dataset.signature_key)
  return {key(name): tf.constant(data.eval_rows[name],
                                 dtypes[column['kind'].split('_')[0]])
          for name, column in data.spec['columns'].items()}


def _sigmoid_cross_entropy(label, logits):
  return np.maximum(logits, 0) - logits * label + np.log1p(
      np.exp(-np.abs(logits)))


def _keras_auc(label, probability, weight):
  auc = tf.keras.metrics.AUC()
  auc.update_state(label, probability, sample_weight=weight)
  return float(auc.result())


def _scores(head, served, label, weight, huber_delta=None):
  """The metrics of a head recomputed from the served predictions, in
  float64 (AUC by Keras's AUC: its thresholds make it another number than
  the exact one)."""
  mean = lambda values: np.sum(weight * values) / np.sum(weight)
  logits = served.get('logits')
  logits = None if logits is None else logits.astype(np.float64)
  if head == 'binary':
    logistic = served['logistic'][:, 0]
    return {'accuracy': mean(served['class_ids'][:, 0] == label),
            'average_loss': mean(_sigmoid_cross_entropy(label, logits[:, 0])),
            'prediction/mean': mean(logistic),
            'auc': _keras_auc(label, logistic, weight)}
  if head == 'multiclass':
    log_softmax = logits - np.log(np.sum(np.exp(logits), 1, keepdims=True))
    return {'accuracy': mean(served['class_ids'][:, 0] == label),
            'average_loss': mean(-log_softmax[np.arange(len(label)), label])}
  if head == 'multilabel':
    probabilities = served['probabilities']
    return {'average_loss': mean(np.mean(
        _sigmoid_cross_entropy(label, logits), axis=1)),
            # canned MultiLabelHead's: every label's probabilities pooled.
            'auc': _keras_auc(label.ravel(), probabilities.ravel(),
                              np.repeat(weight, label.shape[1])),
            **{f'auc/{i}': _keras_auc(label[:, i], probabilities[:, i],
                                      weight)
               for i in range(label.shape[1])}}
  error = np.abs(served['predictions'][:, 0].astype(np.float64) - label)
  delta = huber_delta or np.inf
  loss = np.where(error <= delta, (0.5 if huber_delta else 1) * error ** 2,
                  delta * (error - 0.5 * delta))
  return {'average_loss': mean(loss), 'mean_absolute_error': mean(error),
          'root_mean_squared_error': np.sqrt(mean(error ** 2)),
          'prediction/mean': mean(served['predictions'][:, 0])}


def assert_same_outputs(actual, expected):
  """Two signatures' outputs: the same names, values, float32 rounding
  apart."""
  assert set(actual) == set(expected)
  for key, value in expected.items():
    if value.dtype.kind == 'f':
      np.testing.assert_allclose(actual[key], value, rtol=1e-6, atol=1e-7,
                                 err_msg=key)
    else:
      np.testing.assert_array_equal(actual[key], value, err_msg=key)


@pytest.mark.both_stacks
@pytest.mark.parametrize('engine, name', [
    *(pytest.param('estimator', name, marks=pytest.mark.estimator)
      for name in RUNS), *(('ctl', name) for name in RUNS),
    # Keras's export is ctl's (tf2/export.py): three runs for it.
    *(('keras', name) for name in KERAS_SERVED)])
def test_served_predictions_score_as_the_evaluation(trained, sets, name,
                                                    engine):
  """The SavedModel on the eval split's serialized tf.Examples (and on its
  raw columns): the metrics recomputed from its predictions are
  metrics.json's."""
  data_name, flags = RUNS[name]
  data = sets[data_name]
  model_dir = trained(name, engine)
  signatures = tf.saved_model.load(str(export_dir(model_dir))).signatures
  serialized = tf.constant(examples(data.eval_rows))
  served = {k: v.numpy() for k, v in
            signatures['predict'](examples=serialized).items()}
  raw = signatures['raw:predict'](**_raw(data, engine))
  assert_same_outputs({k: v.numpy() for k, v in raw.items()}, served)
  head = data.spec['head']
  # A canned Estimator's signatures, in every engine (issue 74, item 4).
  canned = {'binary': {'classification', 'regression'},
            'multiclass': {'classification'},
            'multilabel': {'classification'},
            'regression': {'regression'}}[head]
  assert set(signatures) == canned | {'serving_default', 'predict',
                                      'raw:predict'}
  meta_graph = saved_model_utils.get_meta_graph_def(
      str(export_dir(model_dir)), 'serve')
  methods = {name: meta_graph.signature_def[name].method_name.split('/')[-1]
             for name in canned | {'serving_default', 'predict'}}
  expected_methods = {name: {'classification': 'classify',
                             'regression': 'regress'}[name]
                      for name in canned}
  expected_methods.update(predict='predict', serving_default=(
      'regress' if head == 'regression' else 'classify'))
  assert methods == expected_methods
  outputs = {'classification': {'scores': served.get('probabilities')},
             'regression': {'outputs': served.get(
                 'logistic', served.get('predictions'))}}
  for name in canned | {'serving_default'}:
    result = signatures[name](inputs=serialized)
    for key, value in outputs['regression' if 'outputs' in result else
                              'classification'].items():
      np.testing.assert_allclose(result[key].numpy(), value, rtol=1e-6,
                                 atol=1e-7, err_msg=name)
    if 'classes' in result and 'all_classes' in served:
      np.testing.assert_array_equal(result['classes'].numpy(),
                                    served['all_classes'])
  label = _label(data)
  if head == 'multilabel':
    label = label.astype(np.float64)
    names = {f'auc/{i}': f'auc/{n}' for i, n in enumerate(data.spec['label'])}
  else:
    names = {}
  expected = metrics(model_dir)
  for key, value in _scores(head, served, label, data.eval_rows['w'],
                            flags.get('huber_delta')).items():
    assert value == pytest.approx(expected[names.get(key, key)], rel=1e-5,
                                  abs=1e-6), key


@pytest.mark.parametrize('engine', engine_params.engines_with(
    both_stacks=('ctl', 'keras')))
@pytest.mark.parametrize('name, fields', [
    ('users_names', ('probabilities', 'logits')),
    # A regression's one prediction (no logits: the TF2 engines counted
    # rows by them, and failed with KeyError: 'logits').
    ('regression', ('predictions',))])
def test_predictions_are_the_served_ones(trained, sets, tmp_path, engine,
                                         name, fields):
  """--mode=predict of users_names' run (among its columns `weight` and
  `padding`, features since issue 72, item 5) and of a regression: the
  first test rows' predictions, as the export serves them."""
  data = sets[RUNS[name][0]]
  model_dir = trained(name, engine)
  count = 6
  path = engines.ENGINES[engine].run(config(
      model_dir, data, engine=engine, mode='predict', num_predictions=count,
      predictions_file=str(tmp_path / 'predictions.jsonl'), **FLAGS))
  lines = [json.loads(line) for line in open(path, encoding='utf-8')]
  served = tf.saved_model.load(str(export_dir(model_dir))).signatures[
      'predict'](examples=tf.constant(examples(
          {k: v[:count] for k, v in data.eval_rows.items()})))
  assert [line['index'] for line in lines] == list(range(count))
  for field in fields:
    # Written to 6 decimals; and predict's batches are not the 6 served, so
    # float32 sums may round otherwise: a few ulps (measured 3.4 on a logit
    # of 5.5, the numbers' periodic embeddings on).
    np.testing.assert_allclose(
        [line[field] for line in lines], served[field].numpy(), atol=1e-6,
        rtol=1e-6, err_msg=field)


@pytest.mark.both_stacks
@pytest.mark.parametrize('engine, name, signature, key, output', [
    pytest.param('estimator', 'binary', 'classification', 'inputs', 'scores',
                 marks=pytest.mark.estimator),
    pytest.param('estimator', 'regression', 'regression', 'inputs',
                 'outputs', marks=pytest.mark.estimator),
    ('ctl', 'multiclass', 'predict', 'examples', 'probabilities'),
    ('ctl', 'binary', 'classification', 'inputs', 'scores'),
    ('ctl', 'regression', 'serving_default', 'inputs', 'outputs')])
def test_saved_model_cli_serves_tf_examples(trained, sets, tmp_path, engine,
                                            name, signature, key, output):
  """`saved_model_cli run --input_examples`, as a canned Estimator's
  serving clients call it: what tf.saved_model.load serves."""
  data = sets[RUNS[name][0]]
  directory = export_dir(trained(name, engine))
  # The keys `saved_model_cli show --tag_set serve` lists, read where it
  # reads them (no process of its own).
  shown = saved_model_utils.get_meta_graph_def(str(directory), 'serve')
  assert set(shown.signature_def) >= {signature, 'predict',
                                      'serving_default'}
  rows = {k: v[:5] for k, v in data.eval_rows.items()}
  features = [{n: [rows[n][i].item()] for n in data.spec['columns']}
              for i in range(5)]
  cli_config.saved_model_cli_run('--dir', directory, '--tag_set', 'serve',
                       '--signature_def', signature, '--input_examples',
                       f'{key}={json.dumps(features)}', '--outdir', tmp_path)
  loaded = tf.saved_model.load(str(directory)).signatures[signature]
  expected = loaded(**{key: tf.constant(examples(rows))})[output]
  np.testing.assert_allclose(np.load(tmp_path / f'{output}.npy'),
                             expected.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('engine', [
    pytest.param('estimator', marks=pytest.mark.estimator), 'ctl', 'keras'])
def test_tfx_bsl_run_inference_dispatches_on_the_methods(trained, sets,
                                                         engine):
  """tfx-bsl's RunInference (Beam; the `tfx` extra) calls a signature by
  its method: each engine's export gives a binary run's classify, regress
  and predict logs, their values the predict signature's (issue 74, item
  4: the TF2 engines' had predict logs alone)."""
  pytest.importorskip('tfx_bsl')
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.testing import util as beam_util  # pylint: disable=g-import-not-at-top
  from tfx_bsl.public.beam import RunInference  # pylint: disable=g-import-not-at-top
  from tfx_bsl.public.proto import model_spec_pb2  # pylint: disable=g-import-not-at-top
  data = sets['binary']
  rows = {k: v[:4] for k, v in data.eval_rows.items()}
  serialized = examples(rows)
  directory = str(export_dir(trained('binary', engine)))
  predicted = tf.saved_model.load(directory).signatures['predict'](
      examples=tf.constant(serialized))
  expected = {'classification': predicted['probabilities'].numpy()[:, 1],
              'serving_default': predicted['probabilities'].numpy()[:, 1],
              'regression': predicted['logistic'].numpy()[:, 0]}

  def value(log):
    kind = log.WhichOneof('log_type')
    if kind == 'classify_log':
      return kind, [c.classes[1].score for c in
                    log.classify_log.response.result.classifications]
    if kind == 'regress_log':
      return kind, [r.value for r in log.regress_log.response.result.regressions]
    return kind, None

  for name, kind in (('classification', 'classify_log'),
                     ('serving_default', 'classify_log'),
                     ('regression', 'regress_log')):
    spec = model_spec_pb2.InferenceSpecType(
        saved_model_spec=model_spec_pb2.SavedModelSpec(
            model_path=directory, signature_name=[name]))

    def check(logs, name=name, kind=kind):
      # A log an example, in no set order.
      assert [value(log)[0] for log in logs] == [kind] * 4, (name, logs)
      np.testing.assert_allclose(
          sorted(v for log in logs for v in value(log)[1]),
          sorted(expected[name]), rtol=1e-6, atol=1e-7, err_msg=name)

    with beam.Pipeline() as pipeline:
      logs = (pipeline | beam.Create([tf.train.Example.FromString(
          record) for record in serialized]) | RunInference(spec))
      beam_util.assert_that(logs, check)


# --- Batch scoring on Beam (issue 74, item 3) --------------------------------


def _mode_predict(model_dir, data, tmp_path):
  """--mode=predict's lines of the eval files, in their order."""
  path = tmp_path / 'predictions.jsonl'
  cli_config.run_in_process([
      f'--model_dir={model_dir}', '--mode=predict', '--num_predictions=10000',
      f'--train_files={data.train_files}', f'--eval_files={data.eval_files}',
      f'--feature_spec={data.feature_spec}', f'--predictions_file={path}'])
  return [json.loads(line) for line in path.read_text().splitlines()]


def _scored(prefix):
  """(file, line or record) -> the rest of its line, of beam_scoring's
  files `prefix`-*."""
  lines = [json.loads(line) for path in pathlib.Path(prefix).parent.glob(
      f'{pathlib.Path(prefix).name}-*-of-*.jsonl')
           for line in path.read_text().splitlines()]
  scored = {(line.pop('file'), line.pop('line', None) or line.pop('record')):
            line for line in lines}
  assert len(scored) == len(lines)
  return scored


def _assert_scored_as_predicted(scored, predicted, data):
  """Each --mode=predict line (one per record of the eval file, naming its
  file and its line or record as Beam's lines do) is Beam's line of that
  row."""
  assert len(predicted) == len(data.eval_rows[next(iter(data.eval_rows))])
  for line in predicted:
    del line['index']
    place = line.pop('file'), line.pop('line', None) or line.pop('record')
    assert place[0] == data.eval_files
    beam = scored[place]
    assert set(beam) == set(line)
    for name, values in line.items():
      if isinstance(values[0], float):  # Both rounded to 6 decimals.
        np.testing.assert_allclose(beam[name], values, rtol=1e-6, atol=1e-6,
                                   err_msg=name)
      else:
        assert beam[name] == values, name


@pytest.mark.parametrize('name, engine', [
    pytest.param('binary', 'estimator', marks=pytest.mark.estimator),
    ('multiclass', 'ctl')])
def test_beam_scoring_gives_mode_predicts_answers(trained, sets, name,
                                                  engine, tmp_path):
  """A CSV table (string labels, a string column) scored by an estimator
  export, TFRecords (a hashed integer column) by a TF2 one, on
  DirectRunner in this process: every row's predictions those of
  --mode=predict (measured: at most one float32 ulp of a logit apart)."""
  pytest.importorskip('tfx_bsl')
  from estimator_trainer.tabular import beam_scoring  # pylint: disable=g-import-not-at-top
  data, model_dir = sets[name], trained(name, engine)
  prefix = tmp_path / 'scores' / 'part'
  beam_scoring.run([f'--model_dir={model_dir}', f'--input={data.eval_files}',
                    f'--output={prefix}', '--num_shards=2'])
  assert len(list(prefix.parent.glob('part-*-of-00002.jsonl'))) == 2
  _assert_scored_as_predicted(_scored(prefix), _mode_predict(
      model_dir, data, tmp_path), data)


@pytest.mark.estimator
def test_beam_scoring_runs_in_worker_processes(trained, sets, tmp_path):
  """DirectRunner's multi-processing mode pickles the transforms to 2
  worker processes, as a distributed runner does, each loading the model
  once: two files scored, the eval file's answers --mode=predict's."""
  pytest.importorskip('tfx_bsl')
  data, model_dir = sets['binary'], trained('binary', 'estimator')
  prefix = tmp_path / 'scores' / 'part'
  command = [sys.executable, '-m', 'estimator_trainer.tabular.beam_scoring',
             f'--model_dir={model_dir}',
             f'--input={data.eval_files},{data.train_files}',
             f'--output={prefix}', '--', '--direct_num_workers=2',
             '--direct_running_mode=multi_processing']
  kept_output.run_ok(command)
  scored = _scored(prefix)
  with open(data.train_files) as f:
    assert len([key for key in scored if key[0] == data.train_files]) == (
        len(f.readlines()) - 1)
  _assert_scored_as_predicted(scored, _mode_predict(model_dir, data,
                                                    tmp_path), data)


@pytest.mark.estimator
def test_beam_scorings_bad_cell_is_the_commands_one_line(trained, sets,
                                                         tmp_path, capsys,
                                                         monkeypatch):
  """Training's check's line, exit 1, no traceback; no output files."""
  pytest.importorskip('tfx_bsl')
  from estimator_trainer.tabular import beam_scoring  # pylint: disable=g-import-not-at-top
  data, model_dir = sets['binary'], trained('binary', 'estimator')
  with open(data.eval_files) as f:
    lines = f.readlines()
  lines[3] = lines[3].replace(',', ',x', 1)  # Its second cell: no number.
  bad = tmp_path / 'bad.csv'
  bad.write_text(''.join(lines))
  monkeypatch.setattr(sys, 'argv', [
      'beam_scoring', f'--model_dir={model_dir}', f'--input={bad}',
      f'--output={tmp_path / "out"}'])
  with pytest.raises(SystemExit) as exited:
    beam_scoring.main()
  assert exited.value.code == 1
  column = lines[0].split(',')[1]
  value = lines[3].split(',')[1]
  assert capsys.readouterr().err == (
      f"error: {bad} line 4, column {column!r}: {value!r} is not a number "
      "(--unreadable_as_missing reads such cells as missing) [while running "
      "'Read']\n")
  assert not list(tmp_path.glob('out*.jsonl'))  # Not half the predictions.


# --- docs/guide/export.md's signature tables ---------------------------------

# Issue 47, item 4: the page gave the estimator engine's input as `inputs`
# for every signature and the TF2 exports "the same outputs".
PAGE = pathlib.Path(__file__).resolve().parents[1] / 'docs/guide/export.md'


def _table(marker):
  """The rows (lists of cells) of the page's table after `<!-- marker -->`."""
  text = PAGE.read_text().split(f'<!-- {marker} -->\n', 1)[1]
  lines = text.split('\n\n', 1)[0].splitlines()[2:]  # Past the header.
  return [[cell.strip() for cell in line.strip('|').split('|')]
          for line in lines]


def _names(cell):
  return re.findall(r'`([^`]+)`', cell)


def documented(engine, head, columns):
  """signature -> (inputs, outputs) that the page gives `engine` and
  `head`, `columns` the data's feature columns."""
  predictions = {row[0].strip('`'): set(_names(row[1]))
                 for row in _table('predictions')}
  signatures = {}
  for engines_cell, heads_cell, names, inputs, outputs in _table(
      'signatures'):
    if engine not in _names(engines_cell) or not (
        heads_cell == 'every head' or head in _names(heads_cell)):
      continue
    for name in _names(names):
      assert name not in signatures, f'{name} twice for {engine} {head}'
      signatures[name] = (
          columns if inputs == 'the columns' else set(_names(inputs)),
          predictions[head] if outputs == "the head's predictions"
          else set(_names(outputs)))
  return signatures


def exported(model_dir):
  """signature -> (inputs, outputs) of model_dir's final export, as
  `saved_model_cli show` reads them."""
  meta = saved_model_utils.get_meta_graph_def(str(export_dir(model_dir)),
                                              'serve')
  return {name: (set(signature.inputs), set(signature.outputs))
          for name, signature in meta.signature_def.items()
          if name != '__saved_model_init_op'}


@pytest.mark.parametrize('engine', engine_params.engines_with(
    both_stacks=('ctl',)))
@pytest.mark.parametrize('head', ('binary', 'multiclass', 'multilabel',
                                  'regression'))
def test_the_export_pages_signatures_are_the_exports(trained, sets, head,
                                                     engine):
  """Each head's run of RUNS, as the page's tables give its engine."""
  data = sets[head]
  columns = {tabular_dataset.signature_key(name)
             for name in data.spec['columns']}
  assert exported(trained(head, engine)) == documented(engine, head, columns)


# --- 1 vs 2 replicas: the loss scaling, with weights ------------------------

# The head -> its set: binary on the census-like set (string labels,
# missing values, a hashed id of 1024 bins; tabular_sets.CENSUS_COLUMNS of
# it).
INVARIANCE = {'binary': 'census', 'multiclass': 'multiclass',
              'regression': 'regression', 'multilabel': 'multilabel'}


def model_weights(model_dir, checkpoint=None):
  """name -> value of the weights in `checkpoint` (default: model_dir's
  latest), an Estimator's or a TF2 engine's; checkpoint 'initial': a fresh
  build's, as the engines build it (model.json)."""
  record = json.loads((pathlib.Path(model_dir) / 'model.json').read_text())
  head = heads.make(record['head'], record['class_names'])
  args = (record['model'], record['model_input'], head.logits_dimension,
          record['model_kwargs'])
  names = models.check(*args)
  build = lambda: models.build(*args, seed=record['run']['seed'])
  if checkpoint == 'initial':
    values = [w.numpy() for w in build().weights]
  else:
    values = weights_lib.read_weights(
        checkpoint or tf.train.latest_checkpoint(str(model_dir)), names,
        build)
  return dict(zip(names, values))


def one_step(model_dir, data, engine, replicas, **flags):
  """The change of every weight in one SGD step of a global batch of 16 on
  `replicas` replicas (with `flags` beyond FLAGS)."""
  engines.ENGINES[engine].run(config(
      model_dir, data, engine=engine, mode='train',
      strategy='mirrored' if replicas > 1 else 'default',
      cpu_replicas=replicas if replicas > 1 else 0,
      **{**FLAGS, 'optimizer': 'sgd', 'learning_rate': 0.1,
         'train_steps': 1, 'export': 'none', **flags}))
  initial = model_weights(model_dir, str(model_dir / 'model.ckpt-0') if
                          engine == 'estimator' else 'initial')
  if engine == 'estimator':  # The fresh build is the engines' start.
    for name, value in model_weights(model_dir, 'initial').items():
      np.testing.assert_array_equal(initial[name], value, err_msg=name)
  final = model_weights(model_dir)
  return {name: final[name] - value for name, value in initial.items()}


def _relative(a, b):
  """The largest relative difference of a weight's change."""
  return max(float(np.linalg.norm(a[k] - b[k]) / np.linalg.norm(b[k]))
             for k in b)


# Below the census steps' gradient norms (0.26; tripled weights 0.77):
# every step clips, its step still large enough that float32 rounds
# its smallest weights' changes alike (on all 14 columns, at 1e-3 a
# clipped step rebuilt unclipped scored 1.1e-2 against a run's unclipped
# step, at 0.1 1e-4; on tabular_sets.CENSUS_COLUMNS 5e-6).
CLIP = 0.1
# The census runs the binary invariance and the clipped-step tests share
# (name -> the set, replicas, flags beyond CLIP's): a clipped SGD step is
# the unclipped one scaled to norm rate x CLIP, so 3 x the weights step
# alike (the clipped test's), and times the gradient_norm summary / CLIP
# it is the unclipped step (the invariance test's). 2 runs for both tests.
CENSUS_STEPS = {
    'accumulated': ('census', 1, dict(global_batch_size=8,
                                      accumulate_steps=2)),
    'two': ('census_tripled', 2, {})}


@pytest.fixture(scope='module')
def census_steps(sets, tmp_path_factory):
  """step(name, engine) -> (one_step's changes of CENSUS_STEPS[name]
  trained by `engine`, clipped to CLIP; its gradient norm before clipping),
  trained on first use."""
  done, specs = {}, tmp_path_factory.mktemp('census_columns')

  def step(name, engine):
    if (name, engine) not in done:
      data, replicas, flags = CENSUS_STEPS[name]
      model_dir = tmp_path_factory.mktemp(f'census_{name}_{engine}')
      changes = one_step(model_dir, tabular_sets.narrowed(sets[data], specs),
                         engine, replicas, clip_global_norm=CLIP,
                         save_summary_steps=1, **flags)
      norm = _summary_values(model_dir, 'gradient_norm')
      assert list(norm) == [1] and norm[1] > CLIP, norm  # It clipped.
      done[name, engine] = changes, norm[1]
    return done[name, engine]

  return step


@pytest.fixture(scope='module')
def ctl_steps(sets, tmp_path_factory):
  """step(head) -> one_step's changes of INVARIANCE[head] on 1 replica by
  ctl, trained on first use: every engine's 2-replica step of the head is
  checked against it (keras's step is ctl's, the Estimator's the same step
  in a graph: test_engines_agree's 40 steps of each head agree to 1e-6 and
  1e-4), one 1-replica run per head, not one per engine."""
  done = {}

  def step(head):
    if head not in done:
      done[head] = one_step(tmp_path_factory.mktemp(f'{head}_one'),
                            sets[INVARIANCE[head]], 'ctl', 1)
    return done[head]

  return step


@pytest.mark.parametrize('engine', [pytest.param('estimator', marks=(
    pytest.mark.estimator)), 'ctl', 'keras'])
@pytest.mark.parametrize('head', INVARIANCE)
def test_2_replicas_step_as_1_with_weights(sets, census_steps, ctl_steps,
                                           tmp_path, head, engine):
  """Each replica sums its examples' weighted losses and divides by the
  global batch: 2 replicas take the 1-replica step (the invariance score,
  as the CNN's; ctl's 1-replica step for every engine); and the weights
  enter that sum, not a mean: binary's 2 replicas on tripled weights take
  a tripled step (one run for both: a replica count's or the weights'
  error would show as another factor; binary's runs are the clipped
  test's, the 1-replica one in 2 micro-batches, each unclipped step its
  clipped one x its gradient_norm / CLIP)."""
  if head == 'binary':
    unclipped = lambda changes, norm: {k: v * norm / CLIP
                                       for k, v in changes.items()}
    one = {k: 3 * v for k, v in unclipped(*census_steps(
        'accumulated', engine)).items()}
    two = unclipped(*census_steps('two', engine))
  else:
    one = ctl_steps(head)
    two = one_step(tmp_path / 'two', sets[INVARIANCE[head]], engine, 2)
  for name, change in one.items():
    assert np.linalg.norm(change) > 0, f'{name} did not train'
  score = _relative(two, one)
  print(f'{head} on {engine}: invariance score {score:.1e}')
  assert score < 0.01


@pytest.mark.parametrize('engine', engine_params.engines_with(
    both_stacks=('ctl', 'keras')))
def test_columns_named_weight_and_padding_train_weighted_by_the_weight_column(
    sets, tmp_path, engine):
  """users_names' columns `weight` and `padding` are features (refused
  before issue 72, item 5) and its example weights the weight column `w`:
  a linear model's first SGD step from 0 moves the bias by -rate x the sum
  over the batch (the first 16 training rows: unshuffled) of w x
  (sigmoid(0) - label) / 16, and both columns' weights move."""
  data = sets['users_names']
  changes = one_step(tmp_path, data, engine, 1, model='linear',
                     model_kwargs=None)
  with open(data.train_files, newline='', encoding='utf-8') as f:
    rows = [row for _, row in zip(range(16), csv.DictReader(f))]
  weight = np.array([float(row['w']) for row in rows])
  label = np.array([data.spec['label_vocabulary'].index(row['diagnosis'])
                    for row in rows])
  assert changes['logits/bias'] == pytest.approx(
      [-0.1 * np.sum(weight * (0.5 - label)) / 16], rel=1e-5)
  for name in ('weight', 'padding'):
    assert np.abs(changes[f'linear/weights_{name}/kernel']).max() > 0, name


@pytest.mark.slow
@pytest.mark.parametrize('engine', [pytest.param('estimator', marks=(
    pytest.mark.estimator)), 'ctl', 'keras'])
def test_a_clipped_step_with_embeddings_is_the_same_on_2_replicas(
    census_steps, engine):
  """Sparse gradients (embedding rows, some looked up on both replicas and
  in both micro-batches) summed and clipped: 1 replica x 2 micro-batches of
  8 steps as 2 replicas x 8 (on 3 x the weights: the same clipped step),
  with a norm every step clips; the step's norm is the clipped one (each
  row's gradient summed before the norm)."""
  one = census_steps('accumulated', engine)[0]
  two = census_steps('two', engine)[0]
  score = _relative(one, two)
  print(f'clipped sparse step on {engine}: invariance score {score:.1e}')
  assert score < 0.01
  step_norm = np.sqrt(sum(np.sum(change**2) for change in two.values()))
  np.testing.assert_allclose(step_norm, 0.1 * CLIP, rtol=1e-4)


# --- Migration and resume ---------------------------------------------------


def _flags(data):
  return [f'--train_files={data.train_files}',
          f'--eval_files={data.eval_files}',
          f'--feature_spec={data.feature_spec}', '--model=dnn',
          f'--model_kwargs={json.dumps(FLAGS["model_kwargs"])}']


def _migrate(source, to, data):
  """`migrate --from=source --to=to` with `data`'s flags in-process: its
  config as its main builds it (--to the model_dir, engine ctl) and its
  call. The command as a process:
  test_an_estimator_model_dir_carried_to_ctl_evaluates_alike, and
  test_migrate.py's flags and exit codes."""
  return migration.convert(dataclasses.replace(
      cli_config.config_from([f'--model_dir={to}', *_flags(data)]),
      engine='ctl', cluster=None), str(source))


@pytest.mark.estimator
def test_an_estimator_model_dir_carried_to_ctl_evaluates_alike(
    trained, sets, tmp_path):
  """migrate carries the weights, the Adam slots and the stored
  statistics (not a cluster's shares of their pass); ctl then evaluates the
  checkpoint to the same metrics."""
  source, to, data = tmp_path / 'estimator', tmp_path / 'ctl', sets['binary']
  shutil.copytree(trained('binary', 'estimator'), source)
  shares = source / 'preprocessing' / 'summaries'
  shares.mkdir()  # As a cluster's trainers leave it.
  (shares / 'digest-1-of-2.pickle').write_bytes(b'')
  # The real command: the one on structured data (test_migrate.py's are on
  # images; test_wide_deep_optimizers.py's in-process).
  result = warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.migrate', f'--from={source}',
       f'--to={to}', *_flags(data)], 600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == f'{to}/ckpt-{FLAGS["train_steps"]}'
  for name in ('statistics.json', 'training_files.json'):
    stored = pathlib.Path('preprocessing', name)
    assert (to / stored).read_text() == (source / stored).read_text()
  assert not (to / 'preprocessing' / 'summaries').exists()
  engines.ENGINES['ctl'].run(config(to, data, engine='ctl', mode='evaluate',
                                    **FLAGS))
  carried, evaluated = metrics(to), metrics(source)
  print(f'Estimator vs carried to ctl: {_worst(carried, evaluated):.1e}')
  for key, value in evaluated.items():
    assert carried[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_resume_on_changed_data_keeps_the_statistics_and_says_so(
    trained, sets, tmp_path, caplog):
  data = sets['binary']
  model_dir = tmp_path / 'resumed'
  shutil.copytree(trained('binary', 'ctl'), model_dir)
  statistics = model_dir / 'preprocessing' / 'statistics.json'
  stored = statistics.read_text()
  # The same rows, one size renamed and the radius in other units.
  with open(data.train_files) as f:
    rows = list(csv.DictReader(f))
  for row in rows:
    row['size'] = {'large': 'huge'}.get(row['size'], row['size'])
    row['mean_radius'] = str(float(row['mean_radius']) * 10)
  with open(tmp_path / 'changed.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  changed = dataclasses.replace(data, train_files=str(tmp_path /
                                                      'changed.csv'))
  steps = FLAGS['train_steps'] + 4
  with caplog.at_level(logging.WARNING):
    engines.ENGINES['ctl'].run(config(
        model_dir, changed, engine='ctl', mode='train',
        **{**FLAGS, 'train_steps': steps, 'export': 'none'}))
  said = [r.getMessage() for r in caplog.records
          if r.levelno >= logging.WARNING and 'statistics' in r.getMessage()]
  assert len(said) == 1 and '\n' not in said[0], said
  assert "'size' vocabulary (1 new values, 1 gone)" in said[0]
  assert "'mean_radius' mean" in said[0]
  assert 'this run keeps the stored ones' in said[0]
  assert statistics.read_text() == stored
  assert tf.train.latest_checkpoint(str(model_dir)).endswith(f'ckpt-{steps}')


# --- The model_dir's own feature spec ---------------------------------------


def _edited_spec(data, directory, edit):
  """A copy of `data`'s feature spec file, changed by `edit(spec dict)`."""
  spec = json.loads(pathlib.Path(data.feature_spec).read_text())
  edit(spec)
  path = directory / 'edited.json'
  path.write_text(json.dumps(spec))
  return str(path)


def _files(model_dir):
  """relative path -> content of every file under model_dir."""
  return {str(p.relative_to(model_dir)): p.read_bytes()
          for p in sorted(pathlib.Path(model_dir).rglob('*')) if p.is_file()}


def _reverse_classes(spec):
  spec['label_vocabulary'].reverse()


def _unnormalized(spec):
  spec['columns']['mean_radius']['kind'] = 'float'


def _one_more_column(spec):
  spec['columns']['mean_area'] = {'kind': 'float'}


# mode, engine of the model_dir, the spec's edit, what the error names.
SPEC_CHANGES = [
    ('evaluate', 'ctl', _reverse_classes, 'label_vocabulary order'),
    ('export', 'ctl', _unnormalized,
     'columns.mean_radius.kind float_normalized -> float'),
    ('train', 'ctl', _one_more_column, 'column mean_area added'),
    ('predict', 'keras', _reverse_classes, 'label_vocabulary order'),
    pytest.param('migrate', 'estimator', _unnormalized,
                 'columns.mean_radius.kind float_normalized -> float',
                 marks=pytest.mark.estimator)]


@pytest.mark.parametrize('mode, engine, edit, named', SPEC_CHANGES)
def test_another_spec_than_the_model_dirs_is_a_usage_error(
    trained, sets, tmp_path, mode, engine, edit, named):
  """Every later mode reads the spec stored with the statistics: a
  --feature_spec other than it fails (exit 2, one line naming the
  difference) before anything is written."""
  data = sets['binary']
  model_dir = tmp_path / 'model'
  shutil.copytree(trained('binary', engine), model_dir)
  before = _files(model_dir)
  edited = dataclasses.replace(data, feature_spec=_edited_spec(
      data, tmp_path, edit))
  # In-process (no TensorFlow process of its own): a UsageError is what
  # the commands' mains report as one line and exit 2 (test_run.py's,
  # test_migrate.py's).
  with pytest.raises(UsageError) as raised:
    if mode == 'migrate':
      _migrate(model_dir, tmp_path / 'carried', edited)
    else:
      cli_config.run_in_process([f'--model_dir={model_dir}', f'--mode={mode}',
                                 *_flags(edited)])
  last = str(raised.value)
  assert '\n' not in last, last
  assert f'--feature_spec={edited.feature_spec} differs from' in last, last
  assert named in last, last
  assert _files(model_dir) == before
  assert not (tmp_path / 'carried').exists()


# The model_dir's stored spec is this package's; the ctl evaluation it
# runs, test_each_head_reports_the_canned_metrics_weighted makes on both
# stacks.
@pytest.mark.default_stack_only
def test_later_runs_use_the_stored_spec_given_the_same_or_none(
    trained, sets, tmp_path, caplog):
  """The spec file the run was given, edited since, is not read: evaluate
  without --feature_spec scores as training's final evaluation; the same
  spec re-serialized (other key order, YAML) is the same spec; a model_dir
  of an earlier version, without a stored spec, reads --feature_spec."""
  data = sets['binary']
  model_dir = tmp_path / 'model'
  shutil.copytree(trained('binary', 'ctl'), model_dir)
  expected = metrics(model_dir)
  record = json.loads((model_dir / 'model.json').read_text())
  record['run']['feature_spec'] = _edited_spec(data, tmp_path,
                                               _reverse_classes)
  (model_dir / 'model.json').write_text(json.dumps(record))
  (model_dir / 'metrics.json').unlink()
  # The CLI's flags from model.json's record, in-process.
  with caplog.at_level(logging.INFO):
    cli_config.run_in_process([f'--model_dir={model_dir}', '--mode=evaluate'])
  stored = model_dir / 'preprocessing' / 'feature_spec.json'
  assert f'Feature spec: {stored}' in caplog.text, caplog.text[-3000:]
  for key, value in expected.items():
    assert metrics(model_dir)[key] == pytest.approx(value, rel=1e-5,
                                                    abs=1e-6), key
  spec = json.loads(pathlib.Path(data.feature_spec).read_text())
  reordered = tmp_path / 'reordered.yaml'
  reordered.write_text(yaml.safe_dump(dict(reversed(spec.items())),
                                      sort_keys=True))
  _evaluates_as(model_dir, dataclasses.replace(
      data, feature_spec=str(reordered)), expected)
  stored.unlink()  # An earlier version's model_dir.
  _evaluates_as(model_dir, data, expected)


def _evaluates_as(model_dir, data, expected):
  (model_dir / 'metrics.json').unlink()
  engines.ENGINES['ctl'].run(config(model_dir, data, engine='ctl',
                                    mode='evaluate', **FLAGS))
  for key, value in expected.items():
    assert metrics(model_dir)[key] == pytest.approx(value, rel=1e-5,
                                                    abs=1e-6), key


# --- Warm start across changed data -----------------------------------------

WIDE_DEEP = {**FLAGS, 'model': 'wide_deep', 'export': 'none'}


def _resized(data, directory, vocabulary, new_value):
  """`data` with its training rows' sizes reassigned so that the size
  vocabulary (by frequency) is `vocabulary` reversed, then `new_value` (if
  any); the other columns as they were (the same means and variances)."""
  with open(data.train_files) as f:
    rows = list(csv.DictReader(f))
  sizes = [value for value, count in zip(reversed(vocabulary), (200, 110, 80))
           for _ in range(count)]
  rest = [new_value or vocabulary[0]] * (len(rows) - len(sizes))
  for row, size in zip(rows, sizes + rest):
    row['size'] = size
  path = directory / 'resized.csv'
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  return dataclasses.replace(data, train_files=str(path))


def _vocabulary(model_dir, column):
  return statistics.read(str(pathlib.Path(
      model_dir, 'preprocessing', 'statistics.json'))).columns[column].vocabulary


@pytest.fixture(scope='module')
def wide_deep_sources(sets, tmp_path_factory):
  """source(engine) -> the model_dir of WIDE_DEEP on binary trained by
  `engine`, trained on first use: both warm starts of an engine read it
  (and write only their own model_dir)."""
  done = {}

  def source(engine):
    if engine not in done:
      done[engine] = tmp_path_factory.mktemp(f'wide_deep_{engine}')
      engines.ENGINES[engine].run(config(done[engine], sets['binary'],
                                         engine=engine, **WIDE_DEEP))
    return done[engine]

  return source


# Keras's fit trains ctl's Job, warm-started in its restore()
# (tf2/restore.py) before either loop starts.
@pytest.mark.parametrize('new_value', [None, 'huge'])
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_a_warm_start_on_a_reordered_vocabulary_evaluates_as_its_source(
    sets, wide_deep_sources, tmp_path, engine, new_value, caplog):
  """The warm-started model's size tables (the embedding and the linear
  weights of wide_deep) follow each size to its new id, a new size keeping
  its initial rows: after a step at rate 1e-12 it evaluates as its
  source."""
  data, source, warm = (sets['binary'], wide_deep_sources(engine),
                        tmp_path / 'warm')
  vocabulary = _vocabulary(source, 'size')
  with caplog.at_level(logging.INFO):
    engines.ENGINES[engine].run(config(
        warm, _resized(data, tmp_path, vocabulary, new_value),
        engine=engine, warm_start_from=str(source), **{
            **WIDE_DEEP, 'optimizer': 'sgd', 'learning_rate': 1e-12,
            'train_steps': 1}))
  assert _vocabulary(warm, 'size') == (*reversed(vocabulary),
                                       *([new_value] if new_value else []))
  expected = {key: metrics(source)[key] for key in CANNED['binary']}
  print(f'{engine} warm-started vs its source: '
        f'{_worst(metrics(warm), expected):.1e}')
  for key, value in expected.items():
    assert metrics(warm)[key] == pytest.approx(value, rel=1e-5,
                                               abs=1e-6), key
  remapped = ('remapped rows of 2 by vocabulary: size' +
              (' (1 new value)' if new_value else ''))
  said = [r.getMessage() for r in caplog.records
          if r.getMessage().startswith('Warm-start')]
  assert any(line.endswith(remapped) for line in said), said
