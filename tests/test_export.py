"""SavedModel export: signatures, parity with --mode=predict, saved_model_cli;
the TF2 engines' exports match the estimator engine's."""

import functools
import gzip
import itertools
import json
import os
import pathlib
import re
import shutil
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import engines
from estimator_trainer import examples
from estimator_trainer import export_policy
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.examples import EXAMPLES_SIGNATURE
from estimator_trainer.tf2 import migration
from conftest import write_idx
import builders
import cli_config
import engine_params

NUM_IMAGES = 1000

# In one pytest-xdist worker: the exports they share are made once.
pytestmark = pytest.mark.xdist_group('export')


def _config(model_dir, idx_dir, **kwargs):
  return TrainConfig(model_dir=str(model_dir), dataset='mnist',
                     idx_dir=str(idx_dir), **kwargs)


@pytest.fixture(scope='module')
def exported(tmp_path_factory, mnist_small_dir):
  """A model trained 2 replicas wide, its export and its predictions."""
  estimator = pytest.importorskip('estimator_trainer.estimator',
                                  exc_type=ImportError)
  model_dir = tmp_path_factory.mktemp('export')
  estimator.train(_config(model_dir, mnist_small_dir, train_steps=60,
                          strategy='mirrored', cpu_replicas=2))
  path = estimator.export(_config(model_dir, mnist_small_dir, mode='export'))
  predictions = estimator.predict(_config(
      model_dir, mnist_small_dir, mode='predict', num_predictions=NUM_IMAGES))
  rows = [json.loads(line) for line in open(predictions)]
  return path, rows


@pytest.fixture(scope='module')
def test_images(mnist_small_dir):
  ds = sources.IdxSource('mnist', str(mnist_small_dir)).dataset(sources.TEST)
  images, _ = next(iter(ds.batch(NUM_IMAGES)))
  return (tf.cast(images, tf.float32) / 255.0).numpy()


@pytest.mark.slow
def test_export_lands_under_model_dir_export(exported):
  path, _ = exported
  assert re.search(r'/export/manual/\d+$', path)
  assert os.path.exists(os.path.join(path, 'saved_model.pb'))


@pytest.mark.slow
def test_reloaded_savedmodel_matches_predict_mode(exported, test_images):
  path, rows = exported
  serve = tf.saved_model.load(path).signatures['serving_default']
  outputs = serve(image=tf.constant(test_images))
  assert outputs['classes'].numpy().tolist() == [r['class'] for r in rows]
  np.testing.assert_allclose(outputs['probabilities'].numpy(),
                             [r['probabilities'] for r in rows], atol=1e-5)
  assert outputs['logits'].shape == (NUM_IMAGES, 10)


@pytest.mark.slow
def test_tf_example_signature_gives_the_same_outputs(exported, test_images):
  path, rows = exported
  signature = tf.saved_model.load(path).signatures[EXAMPLES_SIGNATURE]
  raw = np.round(test_images[:50] * 255).astype(np.uint8)
  outputs = signature(examples=tf.constant(
      [examples.ExampleFormat((28, 28, 1), 10).encode(x, 0) for x in raw]))
  assert outputs['classes'].numpy().tolist() == [r['class']
                                                 for r in rows[:50]]
  np.testing.assert_allclose(outputs['probabilities'].numpy(),
                             [r['probabilities'] for r in rows[:50]],
                             atol=1e-5)


@pytest.mark.slow
def test_export_carries_no_cluster_device_placements(exported):
  path, _ = exported
  saved_model = saved_model_pb2.SavedModel()
  with open(os.path.join(path, 'saved_model.pb'), 'rb') as f:
    saved_model.ParseFromString(f.read())
  devices = {node.device for meta_graph in saved_model.meta_graphs
             for node in meta_graph.graph_def.node}
  # Plain CPU pins (TensorFlow's saver ops) load anywhere; a cluster task's
  # placement would not (tensorflow#23900).
  assert devices <= {'', '/device:CPU:0', '/device:CPU:*'}


def _saved_model_cli_classes(path, images, directory):
  """The classes `saved_model_cli run` serves for `images` from the export
  at `path`: its run command in this process (the tool as a process is
  docs/guide/export.md's example, which test_docs runs), its outputs
  written to `directory`."""
  np.save(directory / 'images.npy', images)
  cli_config.saved_model_cli_run(
      '--dir', path, '--tag_set', 'serve', '--signature_def',
      'serving_default', '--inputs', f'image={directory / "images.npy"}',
      '--outdir', directory / 'out')
  return np.load(directory / 'out' / 'classes.npy').tolist()


@pytest.mark.slow
def test_saved_model_cli_runs_it(exported, test_images, tmp_path):
  """TensorFlow's own tool serves the export. Its signatures are the loaded
  export's (test_reloaded_savedmodel_matches_predict_mode,
  test_tf_example_signature_gives_the_same_outputs): no `show` process."""
  path, rows = exported
  assert _saved_model_cli_classes(path, test_images[:5], tmp_path) == [
      r['class'] for r in rows[:5]]


# --- The TF2 engines' SavedModels: the same signatures and outputs ----------


def _signature_specs(path):
  """Each signature's inputs and outputs: name -> (dtype, shape)."""
  loaded = tf.saved_model.load(path)
  specs = {}
  for key, function in loaded.signatures.items():
    inputs = function.structured_input_signature[1]
    specs[key] = (
        {name: (spec.dtype, spec.shape.as_list())
         for name, spec in inputs.items()},
        {name: (spec.dtype, spec.shape.as_list())
         for name, spec in function.structured_outputs.items()})
  return specs


@pytest.fixture(scope='module')
def carried_over(tmp_path_factory, exported, mnist_small_dir):
  """The estimator engine's model_dir carried over to ctl (tf2/migration.py), its
  export and its predictions."""
  estimator_dir = pathlib.Path(exported[0]).parents[2]
  config = functools.partial(_config, tmp_path_factory.mktemp('ctl'),
                             mnist_small_dir, engine='ctl')
  migration.convert(config(), str(estimator_dir))
  path = engines.ENGINES['ctl'].run(config(mode='export'))
  predictions = engines.ENGINES['ctl'].run(
      config(mode='predict', num_predictions=NUM_IMAGES))
  return path, [json.loads(line) for line in open(predictions)]


@pytest.mark.slow
def test_tf2_export_has_the_estimator_exports_signatures(exported,
                                                         carried_over):
  assert re.search(r'/export/manual/\d+$', carried_over[0])
  assert _signature_specs(carried_over[0]) == _signature_specs(exported[0])


@pytest.mark.slow
def test_tf2_export_serves_the_estimator_exports_outputs(exported,
                                                         carried_over,
                                                         test_images):
  """Same weights: same classes, probabilities and logits on 1,000 real
  images, through both signatures."""
  served = {}
  for name, (path, _) in [('estimator', exported), ('ctl', carried_over)]:
    loaded = tf.saved_model.load(path)
    raw = np.round(test_images[:50] * 255).astype(np.uint8)
    served[name] = (
        loaded.signatures['serving_default'](image=tf.constant(test_images)),
        loaded.signatures[EXAMPLES_SIGNATURE](examples=tf.constant(
            [examples.ExampleFormat((28, 28, 1), 10).encode(x, 0)
             for x in raw])))
  for estimator_out, ctl_out in zip(served['estimator'], served['ctl']):
    np.testing.assert_array_equal(ctl_out['classes'],
                                  estimator_out['classes'])
    for key in ('probabilities', 'logits'):
      np.testing.assert_allclose(ctl_out[key], estimator_out[key], atol=1e-5)
  logits = np.abs(served['ctl'][0]['logits'] -
                  served['estimator'][0]['logits']).max()
  print(f'max |logit difference| on {NUM_IMAGES} images: {logits:.1e}')


@pytest.mark.slow
def test_tf2_predict_mode_writes_the_estimator_predictions(exported,
                                                           carried_over):
  _, estimator_rows = exported
  _, ctl_rows = carried_over
  assert [r['class'] for r in ctl_rows] == [r['class']
                                            for r in estimator_rows]
  np.testing.assert_allclose([r['probabilities'] for r in ctl_rows],
                             [r['probabilities'] for r in estimator_rows],
                             atol=1e-5)


@pytest.mark.slow
def test_saved_model_cli_runs_the_tf2_export(carried_over, exported,
                                             test_images, tmp_path):
  assert _saved_model_cli_classes(carried_over[0], test_images[:5],
                                  tmp_path) == [
      r['class'] for r in exported[1][:5]]


# --- --export: the same rule in every engine ---------------------------------


# Keras's fit reaches the same Controller, whose exporter follows each
# evaluation (its callback's cadence of evaluations: test_engines.py's
# early stopping and resume cases of keras).
ENGINES = engine_params.KINDS


def _records(base_dir):
  """The evaluation each export in `base_dir` holds, oldest first."""
  return [json.loads((base_dir / name / export_policy.RECORD).read_text())
          for name in sorted(os.listdir(base_dir), key=int)]


@pytest.mark.slow
@pytest.mark.both_stacks
@pytest.mark.parametrize('engine', ENGINES)
def test_every_engine_exports_as_it_evaluates(tmp_path, mnist_small_dir,
                                              engine):
  """--export=latest after each evaluation; the --exports_to_keep newest
  kept in every engine, whatever --keep_checkpoint_max. (Of a small MLP:
  the rule is the model's whatever it is; its 4 evaluations cost the CNN's
  convolutions nothing.)"""
  config = _config(tmp_path, mnist_small_dir, engine=engine,
                   model=builders.mlp, train_steps=40,
                   save_checkpoints_steps=10, throttle_secs=0,
                   keep_checkpoint_max=2, export='latest', exports_to_keep=3)
  engines.ENGINES[engine].run(config)
  latest = tmp_path / 'export' / 'latest'
  assert all(name.isdigit() for name in os.listdir(latest))  # No temp-*.
  assert [r['global_step'] for r in _records(latest)] == [20, 30, 40]
  served = tf.saved_model.load(str(latest / max(os.listdir(latest),
                                                key=int)))
  assert set(served.signatures) == {'serving_default', EXAMPLES_SIGNATURE}
  assert json.loads((tmp_path / 'metrics.json').read_text())[
      'global_step'] == 40


@pytest.fixture(scope='module')
def mislabelled_dir(tmp_path_factory, mnist_small_dir):
  """mnist_small_dir with every test label moved to the next class: a model
  evaluated on it scores far below its accuracy on the real labels."""
  directory = tmp_path_factory.mktemp('mislabelled')
  for name in os.listdir(mnist_small_dir):
    shutil.copy(mnist_small_dir / name, directory / name)
  labels_file = sources.IDX_FILES[sources.TEST][1]
  labels = np.frombuffer(gzip.decompress(
      (mnist_small_dir / labels_file).read_bytes())[8:], np.uint8)
  write_idx(directory / labels_file, 2049, (), (labels + 1) % 10)
  return directory


@pytest.mark.slow
@pytest.mark.parametrize('engine', ENGINES)
def test_a_resumed_run_keeps_the_best_export(tmp_path, mnist_small_dir,
                                             mislabelled_dir, engine):
  """--export=best compares a resumed run's evaluations with the best export
  written before it: a worse one is not exported (TF 2.15's BestExporter
  exported the first evaluation of every process; the TF2 engines forgot
  the best on restart). Of a small MLP, as above."""
  common = dict(engine=engine, model=builders.mlp, export='best',
                throttle_secs=0, save_checkpoints_steps=20)
  engines.ENGINES[engine].run(_config(tmp_path, mnist_small_dir,
                                      train_steps=40, **common))
  exported = sorted(os.listdir(tmp_path / 'export' / 'best'))
  accuracy = json.loads((tmp_path / 'metrics.json').read_text())['accuracy']
  assert exported and accuracy > 0.5
  # Resumed, and evaluated on wrong labels: every evaluation is worse.
  engines.ENGINES[engine].run(_config(tmp_path, mislabelled_dir,
                                      train_steps=60, **common))
  worse = json.loads((tmp_path / 'metrics.json').read_text())
  assert worse['global_step'] == 60 and worse['accuracy'] < accuracy
  assert sorted(os.listdir(tmp_path / 'export' / 'best')) == exported


# --- export_policy: which exports count and stay ---------------------------

_timestamps = itertools.count(1_700_000_000)


def _policy(model_dir, kind, keep=5):
  return export_policy.ExportPolicy(TrainConfig(
      model_dir=str(model_dir), export=kind, exports_to_keep=keep))


_steps = itertools.count(1)


def _export(policy, accuracy, fail=False, step=None, final=False):
  """An export after an evaluation at `accuracy` (of a new checkpoint
  step, unless `step`), when `policy` wants one, written as the engines
  write theirs (a temporary directory with the record, renamed when
  whole); `fail`: failing halfway, as one whose checkpoint training
  deleted. Returns its path, or None."""
  result = {'accuracy': np.float32(accuracy),
            'global_step': np.int64(step or next(_steps))}
  if not policy.wants(result, final=final):
    return None

  def write(record, temporary):
    os.makedirs(os.path.join(temporary, export_policy.EXTRA_DIR))
    with open(os.path.join(temporary, export_policy.RECORD), 'w') as f:
      f.write(record)
    if fail:
      raise tf.errors.NotFoundError(None, None, 'model.ckpt-1 was deleted')
    return temporary

  with mock.patch.object(export_policy.time, 'time',
                         lambda: next(_timestamps)):
    return policy.write(write, result)


def test_a_best_export_counts_once_written(tmp_path):
  best = tmp_path / 'export' / 'best'
  policy = _policy(tmp_path, 'best', keep=2)
  assert _export(policy, 0.5)
  with pytest.raises(tf.errors.NotFoundError):
    _export(policy, 0.8, fail=True)
  assert len(os.listdir(best)) == 1  # Its temp-* is gone.
  assert _export(policy, 0.7)  # Below the failed one: the best written.
  assert _export(policy, 0.6) is None
  assert _export(policy, 0.7)  # As accurate, and trained longer.
  assert _export(policy, 0.9)
  assert [r['accuracy'] for r in _records(best)] == pytest.approx([0.7, 0.9])
  restarted = _policy(tmp_path, 'best')  # Reads the bar back.
  assert not restarted.wants({'accuracy': 0.85}, final=True)
  assert restarted.wants({'accuracy': 0.9}, final=False)


def test_best_exports_without_a_record_compare_with_the_evaluations(
    tmp_path):
  """Exports written before they held their evaluation: the bar is the best
  evaluation in model_dir."""
  (tmp_path / 'export' / 'best' / '1700000000').mkdir(parents=True)
  writer = tf.summary.create_file_writer(str(tmp_path / 'eval'))
  with writer.as_default():
    for step, accuracy in [(10, 0.6), (20, 0.75), (30, 0.7)]:
      tf.summary.scalar('accuracy', accuracy, step=step)
  writer.close()
  policy = _policy(tmp_path, 'best')
  assert not policy.wants({'accuracy': 0.74}, final=False)
  assert policy.wants({'accuracy': 0.75}, final=False)


@pytest.mark.parametrize('kind', ['final', 'latest', 'best'])
def test_a_checkpoint_step_already_exported_is_kept_not_exported_again(
    tmp_path, kind):
  """A rerun stopped after its export, before metrics.json, evaluates that
  step again: its export is kept, and what a killed export of this task
  left is removed."""
  policy = _policy(tmp_path, kind)
  path = _export(policy, 0.5, step=938, final=True)
  base_dir = tmp_path / 'export' / kind
  (base_dir / f'{export_policy.TEMPORARY_PREFIX}local-killed').mkdir()
  again = _policy(tmp_path, kind)  # The rerun's.
  assert _export(again, 0.5, step=938, final=True) == path
  assert os.listdir(base_dir) == [os.path.basename(path)]
  assert _export(again, 0.6, step=1000, final=True) != path  # A new step's.


def test_latest_and_final_exports(tmp_path):
  latest = _policy(tmp_path, 'latest', keep=2)
  for accuracy in (0.9, 0.5, 0.7):
    assert _export(latest, accuracy)
  assert [r['accuracy'] for r in _records(tmp_path / 'export' / 'latest')] == (
      pytest.approx([0.5, 0.7]))
  final = _policy(tmp_path, 'final')
  assert not final.wants({'accuracy': 0.9}, final=False)
  assert final.wants({'accuracy': 0.1}, final=True)


def test_two_tasks_exporting_in_the_same_second_both_land_whole(tmp_path):
  """Issue 47, item 9: a chief that does not know of an evaluator exports
  the final checkpoint as the evaluator does, in the same second: they
  wrote the same temp-<timestamp> directory, and one failed (Estimator:
  AlreadyExistsError). Here one export is written whole while the other
  is being saved, under one clock second."""
  from estimator_trainer import heads  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tf2 import export as tf2_export  # pylint: disable=g-import-not-at-top
  import builders  # pylint: disable=g-import-not-at-top
  model = builders.mlp((4, 4, 1), 3, hidden=4)
  head = heads.ImageClassifierHead(('a', 'b', 'c'))
  example_format = examples.ExampleFormat((4, 4, 1), 3)
  base_dir = str(tmp_path / 'export' / 'final')
  save = tf.saved_model.save
  written, saves = [], []

  def save_meanwhile(obj, path, **kwargs):
    saves.append(path)
    if len(saves) == 1:  # The first export's save: the other one's meanwhile.
      written.append(tf2_export.write(model, head, example_format, base_dir,
                                      record='{"task": "evaluator"}\n'))
    save(obj, path, **kwargs)

  with mock.patch.object(tf.saved_model, 'save', save_meanwhile), \
      mock.patch('time.time', lambda: 1_700_000_000.5):
    written.append(tf2_export.write(model, head, example_format, base_dir,
                                    record='{"task": "chief"}\n'))
  assert sorted(os.listdir(base_dir)) == ['1700000000', '1700000001']
  assert sorted(written) == [os.path.join(base_dir, name)
                             for name in sorted(os.listdir(base_dir))]
  for path in written:
    assert tf.saved_model.load(path).signatures['serving_default']


def test_a_task_cleaning_up_leaves_another_tasks_export_being_written(
    tmp_path):
  """The chief's clean-up of failed exports ran while the evaluator wrote
  one: it removed every temp-* directory in the export directory."""
  def policy(task_type):
    return export_policy.ExportPolicy(TrainConfig(
        model_dir=str(tmp_path), export='final', cluster=cluster_lib.Cluster(
            {'worker': ['a:1']}, task_type, 0, True)))

  def write(record, temporary, meanwhile=None):
    if meanwhile:
      meanwhile()
    with open(os.path.join(temporary, 'saved_model.pb'), 'w') as f:
      f.write(record)
    return temporary

  result = {'accuracy': 0.5, 'global_step': 7}
  chief, evaluator = policy('worker'), policy('evaluator')
  path = evaluator.write(functools.partial(
      write, meanwhile=lambda: chief.write(write, result)), result)
  base_dir = tmp_path / 'export' / 'final'
  assert len(os.listdir(base_dir)) == 2
  assert os.path.exists(os.path.join(path, 'saved_model.pb'))
