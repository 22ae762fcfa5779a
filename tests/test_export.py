"""SavedModel export: signatures, parity with --mode=predict, saved_model_cli."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from estimator_trainer import estimator
from estimator_trainer import examples
from estimator_trainer import sources
from estimator_trainer.config import TrainConfig
from estimator_trainer.examples import EXAMPLES_SIGNATURE

NUM_IMAGES = 1000


def _config(model_dir, idx_dir, **kwargs):
  return TrainConfig(model_dir=str(model_dir), dataset='mnist',
                     idx_dir=str(idx_dir), **kwargs)


@pytest.fixture(scope='module')
def exported(tmp_path_factory, mnist_small_dir):
  """A model trained 2 replicas wide, its export and its predictions."""
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


def test_export_lands_under_model_dir_export(exported):
  path, _ = exported
  assert re.search(r'/export/manual/\d+$', path)
  assert os.path.exists(os.path.join(path, 'saved_model.pb'))


def test_reloaded_savedmodel_matches_predict_mode(exported, test_images):
  path, rows = exported
  serve = tf.saved_model.load(path).signatures['serving_default']
  outputs = serve(image=tf.constant(test_images))
  assert outputs['classes'].numpy().tolist() == [r['class'] for r in rows]
  np.testing.assert_allclose(outputs['probabilities'].numpy(),
                             [r['probabilities'] for r in rows], atol=1e-5)
  assert outputs['logits'].shape == (NUM_IMAGES, 10)


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


def test_saved_model_cli_shows_and_runs_it(exported, test_images, tmp_path):
  path, rows = exported
  cli = os.path.join(os.path.dirname(sys.executable), 'saved_model_cli')
  shown = subprocess.run([cli, 'show', '--dir', path, '--all'],
                         capture_output=True, text=True, check=True).stdout
  assert "signature_def['serving_default']" in shown
  assert f"signature_def['{EXAMPLES_SIGNATURE}']" in shown
  np.save(tmp_path / 'images.npy', test_images[:5])
  ran = subprocess.run(
      [cli, 'run', '--dir', path, '--tag_set', 'serve', '--signature_def',
       'serving_default', '--inputs', f'image={tmp_path / "images.npy"}'],
      capture_output=True, text=True, check=True).stdout
  classes = re.search(r'Result for output key classes:\s*\[([\d\s]+)\]', ran)
  assert [int(c) for c in classes.group(1).split()] == [
      r['class'] for r in rows[:5]]

