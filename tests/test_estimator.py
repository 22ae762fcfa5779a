import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import config_resolved
from estimator_trainer import export_policy
from estimator_trainer import models
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError

# The estimator engine's alone: skipped where tf.estimator is missing.
estimator = pytest.importorskip('estimator_trainer.estimator',
                                exc_type=ImportError)
# pylint: disable=g-import-not-at-top,g-bad-import-order
from estimator_trainer.estimator import cluster_roles
from estimator_trainer.estimator import job as job_lib
from estimator_trainer.estimator.params import ModelParams, model_params
from estimator_trainer.strategy import configure_cpu_replicas, configure_threads
from conftest import MNIST_SMALL_TEST_EXAMPLES
import builders

ModeKeys = tf.estimator.ModeKeys
PARAMS = {'optimizer': 'sgd', 'learning_rate': 0.1, 'lr_decay': 'none',
          'global_batch_size': 4, 'seed': 1}


def _mnist_config(directory, idx_dir, **kwargs):
  return TrainConfig(model_dir=str(directory), dataset='mnist',
                     idx_dir=str(idx_dir), **kwargs)


# --- model_fn ---------------------------------------------------------------


def _call_model_fn(mode, model_fn=estimator.model_fn):
  with tf.Graph().as_default():
    features = {'image': tf.zeros([4, 28, 28, 1])}
    labels = tf.constant([0, 1, 2, 3], tf.int64)
    return model_fn(features, labels, mode, PARAMS)


def test_model_fn_predict_returns_classes_probabilities_logits():
  spec = _call_model_fn(ModeKeys.PREDICT)
  assert set(spec.predictions) == {'classes', 'probabilities', 'logits'}
  assert spec.predictions['probabilities'].shape.as_list() == [4, 10]
  assert spec.predictions['classes'].dtype == tf.int64
  assert list(spec.export_outputs) == ['serving_default']
  assert spec.train_op is None


def test_model_fn_eval_returns_loss_and_metrics():
  spec = _call_model_fn(ModeKeys.EVAL)
  assert spec.loss.shape == ()
  assert {'accuracy', 'average_loss', 'num_examples'} <= set(
      spec.eval_metric_ops)
  assert spec.train_op is None


def test_model_fn_train_returns_train_op_that_steps_global_step():
  with tf.Graph().as_default():
    features = {'image': tf.random.uniform([4, 28, 28, 1], seed=1)}
    spec = estimator.model_fn(features, tf.constant([0, 1, 2, 3], tf.int64),
                              ModeKeys.TRAIN, PARAMS)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      losses = [sess.run([spec.train_op, spec.loss])[1] for _ in range(3)]
      assert sess.run(tf.compat.v1.train.get_global_step()) == 3
  # Mean cross-entropy of 10 classes starts near ln(10) and goes down.
  assert 1.5 < losses[0] < 3.5 and losses[-1] < losses[0]


@pytest.mark.parametrize('mode, training', [
    (ModeKeys.TRAIN, True), (ModeKeys.EVAL, False), (ModeKeys.PREDICT, False)])
def test_model_fn_sets_training_only_in_train(mode, training):
  seen = []

  def recording_cnn(input_shape, num_classes, seed=None):
    model = models.cnn(input_shape, num_classes, seed)
    call = model.call
    model.call = lambda x, training=None: (seen.append(training),
                                           call(x, training=training))[1]
    return model

  _call_model_fn(mode, estimator.make_model_fn(recording_cnn))
  assert seen == [training]


# Rows of a model_fn's own batch: labels, weights, and which are padding.
OWN_LABELS = [1, 0, 1, 1, 0, 0]
OWN_WEIGHTS = [1.0, 2.0, 0.5, 3.0, 0.0, 0.0]
OWN_PADDING = [False, False, False, False, True, True]


@pytest.mark.parametrize('columns', [('x',), ('x', 'weight', 'padding',
                                              '_weight')])
def test_model_fn_weighs_by_the_features_weight_and_leaves_out_padding(
    columns):
  """A model_fn fed by an input_fn of your own reads the example weights
  under 'weight' and the padding under 'padding' (the documented keys: the
  loss, the metrics, num_examples), as before issue 72's item 5; where
  structured-data columns have those names, under models.FeatureKeys' keys
  apart from them ('__weight' beside 'weight' and '_weight'), and the
  columns are the model's inputs. The linear model starts at 0: every
  example's loss is log 2, the label's mean the weights'."""
  keys = models.FeatureKeys.of(dict.fromkeys(columns))
  assert keys == (models.FeatureKeys() if columns == ('x',) else
                  models.FeatureKeys('__weight', '_padding'))
  params = {**PARAMS, 'head': 'binary', 'class_names': ('no', 'yes'),
            'model_input': {name: {'kind': 'dense', 'width': 1}
                            for name in columns}}
  rng = np.random.default_rng(0)
  results = {}
  for mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
    with tf.Graph().as_default():
      features = {name: tf.constant(rng.normal(size=(6, 1)), tf.float32)
                  for name in columns}
      features[keys.weight] = tf.constant(OWN_WEIGHTS)
      if mode == ModeKeys.EVAL:
        features[keys.padding] = tf.constant(OWN_PADDING)
      spec = estimator.make_model_fn('linear')(
          features, tf.constant(OWN_LABELS, tf.int64), mode, params)
      with tf.compat.v1.Session() as sess:
        sess.run([tf.compat.v1.global_variables_initializer(),
                  tf.compat.v1.local_variables_initializer()])
        if mode == ModeKeys.TRAIN:
          results['loss'] = sess.run(spec.loss)
        else:
          sess.run([op for _, op in spec.eval_metric_ops.values()])
          results.update(sess.run({name: value for name, (value, _) in
                                   spec.eval_metric_ops.items()}))
  # Summed over the examples, times their weights, over the global batch.
  assert results['loss'] == pytest.approx(
      np.log(2) * sum(OWN_WEIGHTS) / PARAMS['global_batch_size'], rel=1e-6)
  assert results['num_examples'] == 4
  assert results['label/mean'] == pytest.approx(
      np.average(OWN_LABELS, weights=OWN_WEIGHTS), rel=1e-6)
  assert results['average_loss'] == pytest.approx(np.log(2), rel=1e-6)


# --- RunConfig --------------------------------------------------------------


@pytest.mark.parametrize('name, strategy_class, replicas', [
    ('default', None, None),
    ('one_device', tf.distribute.OneDeviceStrategy, 1),
    ('mirrored', tf.distribute.MirroredStrategy, 2),
    ('multi_worker_mirrored',
     tf.distribute.experimental.MultiWorkerMirroredStrategy, 1),
    ('parameter_server',
     tf.compat.v1.distribute.experimental.ParameterServerStrategy, 1),
])
def test_run_config_for_every_strategy(tmp_path, name, strategy_class,
                                       replicas):
  config = TrainConfig(model_dir=str(tmp_path), strategy=name,
                       eval_strategy='mirrored', cpu_replicas=2,
                       save_checkpoints_steps=7, keep_checkpoint_max=3,
                       seed=5)
  run_config = estimator.make_run_config(config)
  if strategy_class is None:
    assert run_config.train_distribute is None
  else:
    assert isinstance(run_config.train_distribute, strategy_class)
    assert run_config.train_distribute.num_replicas_in_sync == replicas
  assert isinstance(run_config.eval_distribute, tf.distribute.MirroredStrategy)
  assert run_config.eval_distribute.num_replicas_in_sync == 2
  assert run_config.model_dir == str(tmp_path)
  assert run_config.save_checkpoints_steps == 7
  assert run_config.keep_checkpoint_max == 3
  assert run_config.tf_random_seed == 5
  assert run_config.session_config.device_count['CPU'] == 2


def test_eval_strategy_is_independent_of_train_strategy(tmp_path):
  run_config = estimator.make_run_config(TrainConfig(
      model_dir=str(tmp_path), strategy='mirrored', cpu_replicas=2))
  assert run_config.train_distribute.num_replicas_in_sync == 2
  assert run_config.eval_distribute is None


def test_thread_flags_reach_the_session_config(tmp_path):
  session_config = estimator.make_run_config(TrainConfig(
      model_dir=str(tmp_path), intra_op_threads=1,
      inter_op_threads=2)).session_config
  assert session_config.intra_op_parallelism_threads == 1
  assert session_config.inter_op_parallelism_threads == 2


def test_threads_cannot_change_after_initialization():
  tf.config.list_logical_devices()  # Initializes TensorFlow's devices.
  configure_threads(0, 0)  # TensorFlow's defaults, as initialized: accepted.
  with pytest.raises(Exception, match='cannot set --intra_op_threads'):
    configure_threads(1, 2)


def test_cpu_replicas_cannot_change_after_initialization():
  tf.config.list_logical_devices()  # Initializes TensorFlow's devices.
  configure_cpu_replicas(2)  # What conftest set: accepted.
  with pytest.raises(Exception, match='cannot split the CPU into 3'):
    configure_cpu_replicas(3)


# --- Loss scaling and evaluation under strategies ---------------------------


def _weights(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.endswith(('kernel', 'bias'))}


def _relative_difference(a, b):
  return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_sgd_steps_are_the_same_with_1_and_2_replicas(tmp_path,
                                                      mnist_small_dir):
  """Same global batch, unshuffled: 2 replicas must step exactly like 1.

  Compares the weight CHANGES: dividing the loss by the per-replica batch
  doubles them, scaling it twice halves them.
  """
  steps, deltas = 5, {}
  for name, replicas in [('default', 0), ('mirrored', 2)]:
    model_dir = tmp_path / name
    config = _mnist_config(model_dir, mnist_small_dir, strategy=name,
                           cpu_replicas=replicas, global_batch_size=32,
                           optimizer='sgd', learning_rate=0.05,
                           shuffle_buffer=0, train_steps=steps)
    assert estimator.train(config) == steps
    initial = _weights(str(model_dir / 'model.ckpt-0'))
    final = _weights(str(model_dir / f'model.ckpt-{steps}'))
    deltas[name] = {k: final[k] - initial[k] for k in final}
    deltas[name + '_initial'] = initial
  for k, delta in deltas['default'].items():
    np.testing.assert_array_equal(deltas['mirrored_initial'][k],
                                  deltas['default_initial'][k])
    assert np.linalg.norm(delta) > 1e-3 * np.linalg.norm(
        deltas['default_initial'][k]), f'{k} did not train'
    assert _relative_difference(deltas['mirrored'][k], delta) < 1e-5, k


@pytest.mark.slow
def test_every_step_trains_on_the_next_batch_whatever_steps_per_loop(
    tmp_path, mnist_small_dir):
  """4 steps per run against 1: runs that end before 4 steps (summary, log
  and checkpoint steps 4 does not divide, 20 steps, a resume at step 7) take
  every batch of the stream in turn, so SGD reaches the same weights, under
  the default and the one_device strategy (one reference run for both)."""
  weights = {}
  for name, strategy_name, per_loop in [('reference', 'default', 1),
                                        ('default', 'default', 4),
                                        ('one_device', 'one_device', 4)]:
    model_dir = tmp_path / name
    for steps in (7, 20):  # Stopped at step 7, then resumed.
      assert estimator.train(_mnist_config(
          model_dir, mnist_small_dir, strategy=strategy_name,
          steps_per_loop=per_loop, train_steps=steps, global_batch_size=16,
          optimizer='sgd', learning_rate=0.05, lr_decay='none',
          shuffle_buffer=0, save_summary_steps=3, log_step_count_steps=5,
          save_checkpoints_steps=6, keep_checkpoint_max=10)) == steps
    weights[name] = _weights(str(model_dir / 'model.ckpt-20'))
  initial = _weights(str(tmp_path / 'reference' / 'model.ckpt-0'))
  for k, reference in weights['reference'].items():
    assert np.linalg.norm(reference - initial[k]) > 1e-3 * np.linalg.norm(
        reference), f'{k} did not train'
  # Each strategy's largest relative difference of a weight, named.
  worst = {looped: max((_relative_difference(weights[looped][k], reference), k)
                       for k, reference in weights['reference'].items())
           for looped in ('default', 'one_device')}
  assert all(score < 1e-5 for score, _ in worst.values()), worst


@pytest.fixture(scope='module')
def trained_mnist_dir(tmp_path_factory, mnist_small_dir):
  model_dir = tmp_path_factory.mktemp('trained')
  estimator.train(_mnist_config(model_dir, mnist_small_dir, train_steps=60))
  return model_dir


@pytest.mark.slow
def test_evaluate_is_the_same_without_strategy_and_with_2_replicas(
    trained_mnist_dir, mnist_small_dir):
  results = {}
  for name in ('default', 'mirrored'):
    config = _mnist_config(trained_mnist_dir, mnist_small_dir,
                           mode='evaluate', eval_strategy=name,
                           cpu_replicas=2 if name == 'mirrored' else 0)
    results[name] = estimator.evaluate(config)
  default, mirrored = results['default'], results['mirrored']
  assert default['num_examples'] == mirrored['num_examples'] == (
      MNIST_SMALL_TEST_EXAMPLES)
  assert default['global_step'] == mirrored['global_step'] == 60
  assert default['accuracy'] == mirrored['accuracy']
  assert default['accuracy'] > 0.5
  assert mirrored['loss'] == pytest.approx(default['loss'], rel=1e-6)


def test_predict_writes_json_lines(trained_mnist_dir, mnist_small_dir):
  config = _mnist_config(trained_mnist_dir, mnist_small_dir, mode='predict',
                         num_predictions=7)
  path = estimator.predict(config)
  assert path == os.path.join(str(trained_mnist_dir), 'predictions.jsonl')
  rows = [json.loads(line) for line in open(path)]
  assert [r['index'] for r in rows] == list(range(7))
  for row in rows:
    assert len(row['probabilities']) == 10
    assert sum(row['probabilities']) == pytest.approx(1.0, abs=1e-4)
    assert row['class'] == int(np.argmax(row['probabilities']))


def _at_60(result):
  """The evaluator's is_final for a run of 60 steps."""
  return result['global_step'] >= 60


def test_evaluator_skips_a_checkpoint_that_training_deleted(
    trained_mnist_dir, mnist_small_dir, tmp_path):
  """Training keeps --keep_checkpoint_max: the evaluator task's checkpoint
  may be gone by the time it restores it."""
  model_dir = tmp_path / 'model'
  shutil.copytree(trained_mnist_dir, model_dir)
  job = job_lib.eval_job(_mnist_config(model_dir, mnist_small_dir,
                                       export='latest'))
  exporters = job_lib.exporters(job)
  for path in model_dir.glob('model.ckpt-0.*'):
    path.unlink()
  assert cluster_roles.evaluate_and_export(
      job, exporters, str(model_dir / 'model.ckpt-0'), _at_60) is None
  result = cluster_roles.evaluate_and_export(
      job, exporters, str(model_dir / 'model.ckpt-60'), _at_60)
  assert result['global_step'] == 60 and (
      result['num_examples'] == MNIST_SMALL_TEST_EXAMPLES)
  assert len(list(model_dir.glob('export/latest/*/saved_model.pb'))) == 1


def test_evaluator_exports_the_checkpoint_it_evaluated_though_deleted(
    trained_mnist_dir, mnist_small_dir, tmp_path, monkeypatch):
  """Training deletes a checkpoint after the evaluator evaluated it, before
  its export (its --keep_checkpoint_max rotation): the evaluator exports
  its own copy of the files, so the export is of the evaluated step (it
  was lost: an early stop's final export 2 runs in 3 on a loaded
  machine), and the copy is gone afterwards."""
  model_dir = tmp_path / 'model'
  shutil.copytree(trained_mnist_dir, model_dir)
  job = job_lib.eval_job(_mnist_config(model_dir, mnist_small_dir,
                                       export='best'))
  exporters = job_lib.exporters(job)
  evaluate = job.estimator.evaluate

  def evaluate_then_train_on(*args, checkpoint_path, **kwargs):
    result = evaluate(*args, checkpoint_path=checkpoint_path, **kwargs)
    for path in model_dir.glob('model.ckpt-60.*'):
      path.unlink()
    return result

  monkeypatch.setattr(job.estimator, 'evaluate', evaluate_then_train_on)
  result = cluster_roles.evaluate_and_export(
      job, exporters, str(model_dir / 'model.ckpt-60'), _at_60)
  assert result['global_step'] == 60
  assert not list(model_dir.glob('model.ckpt-60.*'))
  exported, = os.listdir(model_dir / 'export' / 'best')
  record = json.loads((model_dir / 'export' / 'best' / exported /
                       export_policy.RECORD).read_text())
  assert record['global_step'] == 60
  assert sorted(p.name for p in model_dir.iterdir() if p.name.startswith(
      '.')) == []
  assert record['accuracy'] == pytest.approx(float(result['accuracy']))


def test_evaluate_without_checkpoint_fails_clearly(tmp_path, mnist_small_dir):
  config = _mnist_config(tmp_path, mnist_small_dir, mode='evaluate')
  with pytest.raises(TrainerError, match='no checkpoint in'):
    estimator.evaluate(config)
  assert not (tmp_path / 'metrics.json').exists()


def test_weight_decay_adds_the_l2_penalty_once():
  losses = {}
  for decay in (0.0, 0.01):
    with tf.Graph().as_default():
      features = {'image': tf.random.uniform([4, 28, 28, 1], seed=1)}
      spec = estimator.model_fn(features, tf.constant([0, 1, 2, 3], tf.int64),
                                ModeKeys.TRAIN, {**PARAMS,
                                                 'weight_decay': decay})
      kernels = [v for v in tf.compat.v1.trainable_variables()
                 if v.name.endswith('kernel:0')]
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        losses[decay], squares = sess.run(
            [spec.loss, tf.add_n([tf.reduce_sum(k**2) for k in kernels])])
  assert losses[0.01] - losses[0.0] == pytest.approx(0.01 * squares, rel=1e-4)


def test_warm_start_all_but_the_logits(trained_mnist_dir, mnist_small_dir,
                                       tmp_path):
  estimator.train(_mnist_config(
      tmp_path, mnist_small_dir, train_steps=1, seed=7,
      warm_start_from=str(trained_mnist_dir),
      warm_start_vars='^(?!logits/)'))
  source = tf.train.load_checkpoint(str(trained_mnist_dir))
  started = tf.train.load_checkpoint(str(tmp_path / 'model.ckpt-0'))
  for name in ('conv1/kernel', 'conv2/bias', 'hidden/kernel'):
    np.testing.assert_array_equal(started.get_tensor(name),
                                  source.get_tensor(name))
  assert not np.array_equal(started.get_tensor('logits/kernel'),
                            source.get_tensor('logits/kernel'))


def test_evaluations_since_best_counts_from_the_first_best():
  from estimator_trainer import early_stopping  # pylint: disable=g-import-not-at-top
  assert early_stopping.evaluations_since_best({100: 0.5}) == 0
  assert early_stopping.evaluations_since_best(
      {100: 0.5, 200: 0.7, 300: 0.7, 400: 0.6}) == 2
  assert early_stopping.evaluations_since_best({100: 0.5, 200: 0.9}) == 0


# On 1 device the rule is test_engines' test_early_stopping_ends_training_
# at_the_evaluation_of_its_rule[estimator]'s (the same run with an export).
# Of a small MLP: the rule is the model's whatever it is.
@pytest.mark.slow
def test_early_stopping_ends_training_without_improvement_on_2_replicas(
    tmp_path, mnist_small_dir):
  """A learning rate too small to change accuracy: stop after 2 evals."""
  metrics = estimator.train_and_evaluate(_mnist_config(
      tmp_path, mnist_small_dir, strategy='mirrored', cpu_replicas=2,
      model=builders.mlp, optimizer='sgd', learning_rate=1e-12,
      lr_decay='none', train_steps=2000, save_checkpoints_steps=20,
      throttle_secs=0, early_stopping_evals=2, export='none'))
  # At the evaluation that meets the rule: the third.
  assert metrics['global_step'] == 60
  from estimator_trainer import early_stopping  # pylint: disable=g-import-not-at-top
  accuracies = early_stopping.eval_accuracies(str(tmp_path / 'eval'))
  assert sorted(accuracies) == [20, 40, 60]
  assert early_stopping.evaluations_since_best(accuracies) == 2


def test_training_summaries_reach_model_dir(tmp_path, mnist_small_dir):
  # Of a small MLP: the summaries are the run's whatever the model, and the
  # CNN's convolutions made most of the cost of 40 steps.
  estimator.train(_mnist_config(tmp_path, mnist_small_dir, train_steps=40,
                                model=builders.mlp,
                                save_summary_steps=10, log_step_count_steps=10,
                                strategy='mirrored', cpu_replicas=2))
  tags, graphs = {}, 0
  for path in tmp_path.glob('events.out.tfevents.*'):
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      graphs += bool(event.graph_def)  # What TensorBoard's Graphs tab shows.
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(value.simple_value)
  for tag in ('loss', 'accuracy', 'learning_rate', 'global_step/sec',
              'examples_per_second', 'examples_per_second_per_replica'):
    assert tag in tags, (tag, sorted(tags))
  assert not [t for t in tags if t.startswith('replica_1')]
  assert graphs >= 1
  rates = zip(tags['examples_per_second'],
              tags['examples_per_second_per_replica'])
  assert all(total == pytest.approx(2 * one) for total, one in rates)
  # Each summary has the rate of its step's update: cosine from
  # --learning_rate to 0 over 40 steps, at steps 9, 19, ...
  peak = TrainConfig(model_dir='/tmp/x').learning_rate  # Images' default.
  assert tags['learning_rate'] == pytest.approx(
      [peak / 2 * (1 + np.cos(np.pi * step / 40)) for step in (9, 19, 29, 39)],
      rel=1e-4)  # float32


def test_model_params_take_their_defaults_from_train_config():
  params = ModelParams.from_dict({'global_batch_size': 64, 'decay_steps': 9})
  config = TrainConfig(model_dir='/tmp/x')
  # As the run resolves them (weight_decay from the data: 0 for images).
  resolved = {'weight_decay': config_resolved.weight_decay_of(config, None)}
  for field in dataclasses.fields(ModelParams):
    if field.default is not dataclasses.MISSING and (
        field.name in TrainConfig.__dataclass_fields__):
      assert getattr(params, field.name) == resolved.get(
          field.name, getattr(config, field.name)), field.name
  assert model_params(TrainConfig(model_dir='/tmp/x'), 64, 9) == {
      **dataclasses.asdict(params), 'eval_images': True}


@pytest.mark.parametrize('params, message', [
    ({'global_batch_size': 8, 'learning_rte': 0.1, 'lr_decay': 'none'},
     'unknown learning_rte'),
    ({'lr_decay': 'none'}, 'global_batch_size is required'),
])
def test_bad_model_fn_params_are_named(params, message):
  with pytest.raises(ValueError, match=message):
    ModelParams.from_dict(params)
