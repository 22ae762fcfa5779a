"""A program that imports the package and calls it keeps its global state:
the package adds no logging handler, sets no level, environment variable,
warning filter, Keras policy or garbage collector setting; only the CLI
does (issue 33, item 12)."""

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from estimator_trainer import sources
from estimator_trainer import stack
from conftest import write_idx

REPO = pathlib.Path(__file__).resolve().parents[1]

# A pipeline that imports the package and calls it as the README does; it
# prints what of the process's global state changed in each part.
# TensorFlow is imported first, and saves a checkpoint on its own before the
# package trains: what TensorFlow does is its own, not the package's.
_PIPELINE = '''
import gc, json, logging, os, sys, warnings
import tensorflow as tf

def state():
  loggers = {name: logging.getLogger(name)
             for name in ('', 'tensorflow', 'absl', 'estimator_trainer')}
  return {
      'loggers': {name: [logger.level, repr(logger.handlers),
                         repr(logger.filters), logger.propagate]
                  for name, logger in loggers.items()},
      'environ': dict(os.environ),
      'warnings': repr(warnings.filters),
      'dtype_policy': tf.keras.mixed_precision.global_policy().name,
      'absl_verbosity': __import__('absl.logging').logging.get_verbosity(),
      'collector': [gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()],
  }

def changed(before, after):
  return {key: [before[key], after[key]] for key in before
          if before[key] != after[key]}

states = [state()]
import estimator_trainer
from estimator_trainer import TrainConfig, make_input_fn
from estimator_trainer import engines, stack
from estimator_trainer.sources import make_source

config = TrainConfig(model_dir=sys.argv[1], idx_dir=sys.argv[2],
                     dataset='mnist', train_steps=2, save_checkpoints_steps=2,
                     batch_size_per_replica=8, export='none',
                     precision='mixed_bfloat16')
source = make_source(config)
next(iter(make_input_fn(config, 8, source)('train')))
if stack.has_estimator():
  estimator_trainer.model_params(config, 8, 2, source.spec)
  estimator_trainer.make_run_config(config)
states.append(state())
tf.train.Checkpoint(step=tf.Variable(0)).save(sys.argv[1] + '_tf/ckpt')
states.append(state())
engines.ENGINES[config.engine].run(config)
states.append(state())
print(json.dumps({part: changed(*states[i:i + 2]) for i, part in
                  enumerate(('package calls', 'TensorFlow', 'package run'))}))
'''


@pytest.fixture
def tiny_idx_dir(tmp_path):
  """IDX files of 64 train and 32 test random 28x28 images."""
  rng = np.random.default_rng(0)
  for split, count in ((sources.TRAIN, 64), (sources.TEST, 32)):
    images, labels = sources.IDX_FILES[split]
    write_idx(tmp_path / images, 2051, (28, 28),
              rng.integers(0, 256, (count, 28, 28)))
    write_idx(tmp_path / labels, 2049, (), rng.integers(0, 10, count))
  return tmp_path


def test_the_cli_imports_tensorflow_then_collects_as_before():
  """The CLI's import of TensorFlow (console.quiet_tensorflow, the first in
  its process) with the garbage collector paused: on again after it, with
  the import's objects frozen out of its collections. A program that
  imported TensorFlow first keeps its collector as it was (the pipeline's
  check below)."""
  code = ('import gc; from estimator_trainer import console; '
          'console.quiet_tensorflow(verbose=False); '
          'print(gc.isenabled(), gc.get_freeze_count() > 100_000)')
  result = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                          capture_output=True, text=True, check=False,
                          timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == ['True', 'True']


@pytest.mark.slow
def test_a_pipeline_importing_the_package_keeps_its_global_state(
    tmp_path, tiny_idx_dir):
  """Root logger (handlers, level), the TensorFlow and absl loggers, the
  environment, warning filters, Keras's dtype policy: as they were. A
  library that logs through absl before absl's handler is set up gives the
  root logger a StreamHandler (absl calls logging.basicConfig), and every
  TensorFlow warning then prints twice."""
  env = {'TF_USE_LEGACY_KERAS': '1',  # As on TensorFlow 2.16+ before import.
         'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)}
  result = subprocess.run(
      [sys.executable, '-c', _PIPELINE, str(tmp_path / 'model'),
       str(tiny_idx_dir)],
      capture_output=True, text=True, check=False, env=env, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  changed = json.loads(result.stdout.strip().splitlines()[-1])
  assert changed['package calls'] == {}
  assert changed['package run'] == {}
  # TensorFlow 2.16+ logs a checkpoint's save through absl.logging
  # (checkpoint/functional_saver.py), configuring the root logger itself.
  # TensorFlow 2.15 does not: there the root logger starts the package's run
  # bare, so that the check of the run can fail.
  own = changed['TensorFlow']
  version = tuple(int(part) for part in
                  stack.tensorflow_version().split('.')[:2])
  if version < (2, 16):
    assert own == {}
  else:
    assert set(own) <= {'loggers'}
    before, after = own.get('loggers', ({}, {}))
    assert {name for name in before if before[name] != after[name]} <= {''}
  # The run happened, and the package's own INFO lines stayed in the
  # package's loggers (no handler anywhere shows INFO).
  assert (tmp_path / 'model' / 'metrics.json').exists()
  assert 'Data: ' not in result.stderr


def test_library_modules_log_through_their_own_loggers():
  """absl's logging functions configure the root logger when nothing has
  (logging.basicConfig): only the CLI's modules, under absl's app.run, may
  use them."""
  cli = {'run.py', 'migrate.py'}
  offenders = [
      str(path.relative_to(REPO))
      for path in sorted((REPO / 'estimator_trainer').rglob('*.py'))
      if path.name not in cli and re.search(
          r'^from absl import logging$', path.read_text(), re.MULTILINE)]
  assert not offenders, (
      f'{offenders}: log with logging.getLogger(__name__), not absl.logging')
