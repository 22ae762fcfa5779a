"""Across the two stacks (TensorFlow 2.15 with Estimator, 2.21 with
tf-keras): checkpoints resume and SavedModels serve on either.

OTHER_STACK_PYTHON names the other stack's Python (.ci/run sets it for the
run on each stack); without it these tests are skipped.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import scripts_dir

OTHER = os.environ.get('OTHER_STACK_PYTHON')
PYTHONS = {'this': sys.executable, 'other': OTHER}

pytestmark = pytest.mark.skipif(
    not OTHER, reason="OTHER_STACK_PYTHON (the other stack's python) unset")

# Prints the TensorFlow version, then the export's serving_default logits of
# the first 100 test images (IDX dir, export dir) as JSON.
_SERVE = '''
import json, sys
from estimator_trainer import sources
import tensorflow as tf
images = next(iter(sources.IdxSource('mnist', sys.argv[1]).dataset(
    sources.TEST).batch(100)))[0]
serve = tf.saved_model.load(sys.argv[2]).signatures['serving_default']
logits = serve(image=tf.cast(images, tf.float32) / 255.0)['logits']
print(tf.__version__)
print(json.dumps(logits.numpy().tolist()))
'''


def _train(python, model_dir, idx_dir, steps, *extra):
  result = subprocess.run(
      [python, '-m', 'estimator_trainer.run', '--engine=ctl',
       f'--model_dir={model_dir}', '--dataset=mnist', f'--idx_dir={idx_dir}',
       f'--train_steps={steps}', '--save_checkpoints_steps=10',
       '--export=final', *extra],
      capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stderr


def _serve(python, idx_dir, export_dir):
  """(TensorFlow version, logits) of `export_dir` served by `python`."""
  result = subprocess.run([python, '-c', _SERVE, str(idx_dir),
                           str(export_dir)],
                          capture_output=True, text=True, timeout=600,
                          check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  version, logits = result.stdout.strip().splitlines()[-2:]
  return version, np.array(json.loads(logits))


def _export(model_dir):
  (path,) = (model_dir / 'export' / 'final').iterdir()
  return path


@pytest.mark.parametrize('first, then', [('this', 'other'),
                                         ('other', 'this')])
def test_a_ctl_checkpoint_resumes_on_the_other_stack(tmp_path,
                                                     mnist_small_dir, first,
                                                     then):
  model_dir = tmp_path / 'model'
  _train(PYTHONS[first], model_dir, mnist_small_dir, 20)
  log = _train(PYTHONS[then], model_dir, mnist_small_dir, 40)
  assert f'Restoring {model_dir}/ckpt-20' in log
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 40 and metrics['accuracy'] > 0.5


def test_savedmodels_of_either_stack_serve_alike_on_both(tmp_path,
                                                         mnist_small_dir):
  for stack, python in PYTHONS.items():
    model_dir = tmp_path / stack
    _train(python, model_dir, mnist_small_dir, 20)
    (this_version, here), (other_version, there) = (
        _serve(PYTHONS['this'], mnist_small_dir, _export(model_dir)),
        _serve(PYTHONS['other'], mnist_small_dir, _export(model_dir)))
    assert this_version != other_version
    difference = np.abs(here - there).max()
    print(f'export of {stack} stack: max |logit difference| between '
          f'TensorFlow {this_version} and {other_version}: {difference:.2e}')
    assert difference < 1e-5
    assert (here.argmax(1) == there.argmax(1)).all()


@pytest.mark.estimator
def test_the_migration_tools_output_trains_on_the_other_stack(
    tmp_path, mnist_small_dir):
  """On the Estimator stack: an Estimator model_dir carried over, then
  trained on by ctl on the other stack."""
  source, target = tmp_path / 'estimator', tmp_path / 'ctl'
  result = subprocess.run(
      [sys.executable, '-m', 'estimator_trainer.run',
       f'--model_dir={source}', '--dataset=mnist',
       f'--idx_dir={mnist_small_dir}', '--train_steps=20', '--export=none'],
      capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  result = subprocess.run(
      [sys.executable, '-m', 'estimator_trainer.migrate', f'--from={source}',
       f'--to={target}', '--dataset=mnist', f'--idx_dir={mnist_small_dir}'],
      capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  log = _train(OTHER, target, mnist_small_dir, 30)
  assert f'Restoring {target}/ckpt-20' in log
  assert json.loads((target / 'metrics.json').read_text())['global_step'] == 30


def test_the_benchmark_runs_each_configuration_on_both_stacks(tmp_path):
  result = subprocess.run(
      [sys.executable, str(scripts_dir.SCRIPTS / 'benchmark.py'),
       '--steps=16', '--summary_steps=4', '--configs=ctl_default',
       f'--pythons={sys.executable},{OTHER}',
       f'--work_dir={tmp_path / "work"}'],
      capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  rows = result.stdout.strip().splitlines()[3:5]
  versions = [row.split()[2] for row in rows]
  assert [row.split()[:2] for row in rows] == [['ctl_default', 'TF']] * 2
  assert len(set(versions)) == 2, rows
