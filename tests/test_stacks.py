"""Across the two stacks (TensorFlow 2.15 with Estimator, 2.21 with
tf-keras): checkpoints resume and SavedModels serve on either.

OTHER_STACK_PYTHON names the other stack's Python (.ci/run sets it for the
run on each stack); without it these tests are skipped.
"""

import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import stack
from estimator_trainer.benchmark import census
from estimator_trainer.config import TrainConfig
from estimator_trainer.tf2 import migration
from estimator_trainer.tf2 import restore
import cli_config
import scripts_dir
import serve_export

OTHER = os.environ.get('OTHER_STACK_PYTHON')

pytestmark = [
    pytest.mark.skipif(not OTHER, reason="OTHER_STACK_PYTHON (the other "
                       "stack's python) unset"),
    # In one pytest-xdist worker: the model_dirs they share are made once.
    pytest.mark.xdist_group('stacks'),
    # Each trains on both stacks, in processes of each: over the fast set's
    # budget (conftest.FAST_CPU_SECONDS; 9.5-31.7 CPU-seconds in CI).
    pytest.mark.slow]


def _flags(model_dir, idx_dir, steps):
  return ['--engine=ctl', f'--model_dir={model_dir}', '--dataset=mnist',
          f'--idx_dir={idx_dir}', f'--train_steps={steps}',
          '--save_checkpoints_steps=10', '--export=final']


def _train_here(model_dir, idx_dir, steps):
  """The same command line on this stack, in this process (nothing reads its
  console but the restore's line, which caplog has)."""
  cli_config.run_in_process(_flags(model_dir, idx_dir, steps))


# Run on the other stack, in one process (one TensorFlow import), given
# argv's JSON: each command line of 'runs' through run.main, as `python -m
# estimator_trainer.run` runs it (its flags parsed again), its log on stderr
# between `== run MODEL_DIR` and `== end` lines; then serve_export's (from
# 'tests_dir') logits of the SavedModel in each directory of 'serve' on the
# 'idx_dir' images. Prints `== version` and the TensorFlow version, then
# `== served` and each one's logits as JSON.
_OTHER_STACK = '''
import json, pathlib, sys
todo = json.loads(sys.argv[1])
sys.path.append(todo['tests_dir'])
from other_stack import cli  # Before TensorFlow: it picks the stack's Keras.
import serve_export
import tensorflow as tf

print('== version', tf.__version__, flush=True)
for model_dir, args in todo['runs']:
  print('== run ' + model_dir, file=sys.stderr, flush=True)
  cli(*args)
  print('== end ' + model_dir, file=sys.stderr, flush=True)
for directory in todo['serve']:
  [export] = pathlib.Path(directory).iterdir()
  print('== served', json.dumps(serve_export.logits(todo['idx_dir'],
                                                    export).tolist()),
        flush=True)
'''


def _on_the_other_stack(idx_dir, runs, serve):
  """The other stack's TensorFlow version, each of `runs`' ((model_dir,
  steps)) log, and its logits of the export in each of `serve`."""
  todo = {'tests_dir': os.path.dirname(os.path.abspath(
              serve_export.__file__)),
          'idx_dir': str(idx_dir), 'serve': [str(d) for d in serve],
          'runs': [(str(d), _flags(d, idx_dir, steps)) for d, steps in runs]}
  result = subprocess.run([OTHER, '-c', _OTHER_STACK, json.dumps(todo)],
                          capture_output=True, text=True, timeout=900,
                          check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  (_, version), *served = [line.split(' ', 2)[1:]
                           for line in result.stdout.splitlines()
                           if line.startswith('== ')]
  assert len(served) == len(serve), result.stdout[-3000:]
  logs = {d: result.stderr.split(f'== run {d}\n')[1].split(
      f'== end {d}\n')[0] for d, _ in runs}
  return version, logs, [np.array(json.loads(line)) for _, line in served]


@pytest.fixture(scope='module')
def trained(tmp_path_factory, mnist_small_dir):
  """What the other stack ran, in ONE process of its own (a TensorFlow
  import each was most of a test's CPU): 'this', 20 ctl steps on this
  stack; 'other', a copy of it resumed on the other stack to 40 (its
  checkpoints from then on, and its export, the other stack's); on the
  Estimator stack, 'carried', an Estimator's 20 steps carried over to ctl
  on this stack, trained on to 30 on the other; 'logs', the other stack's
  log of each of its runs; 'served', its TensorFlow version and its logits
  of {stack: export} of 'this' and 'other'."""
  this = tmp_path_factory.mktemp('this')
  _train_here(this, mnist_small_dir, 20)
  other = tmp_path_factory.mktemp('other') / 'model'
  shutil.copytree(this, other, ignore=shutil.ignore_patterns('export'))
  runs = [(other, 40)]
  result = {'this': this, 'other': other}
  if stack.has_estimator():
    # Trained and carried over in this process: the migrate command itself
    # is test_migrate's.
    from estimator_trainer import estimator  # pylint: disable=g-import-not-at-top
    source = tmp_path_factory.mktemp('estimator')
    result['carried'] = tmp_path_factory.mktemp('carried') / 'ctl'
    config = lambda model_dir, **kw: TrainConfig(
        model_dir=str(model_dir), dataset='mnist',
        idx_dir=str(mnist_small_dir), **kw)
    estimator.train(config(source, train_steps=20))
    migration.convert(config(result['carried'], engine='ctl'), str(source))
    runs.append((result['carried'], 30))
  exports = {name: result[name] / 'export' / 'final'
             for name in ('this', 'other')}
  version, result['logs'], logits = _on_the_other_stack(
      mnist_small_dir, runs, exports.values())
  result['served'] = version, {
      name: (next(directory.iterdir()), there)
      for (name, directory), there in zip(exports.items(), logits)}
  return result


def test_a_ctl_checkpoint_resumes_on_the_other_stack(tmp_path, caplog,
                                                     mnist_small_dir, trained):
  """This stack's ckpt-20 resumed on the other stack (the module's 'other'
  model_dir, at 40 steps), and that model_dir's ckpt-40, the other stack's,
  resumed on this one."""
  other = trained['other']
  assert f'Restoring {other}/ckpt-20' in trained['logs'][other]
  metrics = json.loads((other / 'metrics.json').read_text())
  assert metrics['global_step'] == 40 and metrics['accuracy'] > 0.5
  model_dir = tmp_path / 'model'
  shutil.copytree(other, model_dir)
  caplog.set_level(logging.INFO, logger=restore.__name__)
  _train_here(model_dir, mnist_small_dir, 60)
  assert f'Restoring {model_dir}/ckpt-40' in caplog.text
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 60 and metrics['accuracy'] > 0.5


def test_savedmodels_of_either_stack_serve_alike_on_both(mnist_small_dir,
                                                         trained):
  other_version, exports = trained['served']
  assert other_version != tf.__version__
  for stack_name, (export, there) in exports.items():
    here = serve_export.logits(mnist_small_dir, export)
    difference = np.abs(here - there).max()
    print(f'export of {stack_name} stack: max |logit difference| between '
          f'TensorFlow {tf.__version__} and {other_version}: '
          f'{difference:.2e}')
    assert difference < 1e-5
    assert (here.argmax(1) == there.argmax(1)).all()


@pytest.mark.estimator
def test_the_migration_tools_output_trains_on_the_other_stack(estimator,
                                                              trained):
  """On the Estimator stack: an Estimator model_dir carried over, then
  trained on by ctl on the other stack (the module fixture's 'carried')."""
  del estimator  # The fixture: skips without tf.estimator.
  target = trained['carried']
  assert f'Restoring {target}/ckpt-20' in trained['logs'][target]
  assert json.loads((target / 'metrics.json').read_text())['global_step'] == 30


def test_the_benchmark_runs_each_configuration_on_both_stacks(tmp_path):
  """--pythons runs a configuration under each stack's Python, its rows
  named by their TensorFlow version; on a --census_dir written here (the
  script writing its own is test_census_smoke_run's). Its cheapest
  configuration, the engines' TRAIN input_fn: --pythons is the same for
  every one (`runs.run_rounds`), an engine's subprocess is
  test_census_smoke_run's, ctl on the other stack the module fixture's."""
  census.write(str(tmp_path / 'census'), rows=200, num_shards=1)
  result = subprocess.run(
      [sys.executable, str(scripts_dir.SCRIPTS / 'benchmark.py'),
       '--workload=census', f'--census_dir={tmp_path / "census"}',
       '--steps=8', '--summary_steps=2', '--batch_size=8',
       '--configs=tabular_input',
       f'--pythons={sys.executable},{OTHER}',
       f'--work_dir={tmp_path / "work"}'],
      capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.strip().splitlines()
  assert lines[0].startswith('census-like set (200 train, 20 test rows')
  rows = lines[3:5]
  versions = [row.split()[2] for row in rows]
  assert [row.split()[:2] for row in rows] == [['tabular_input', 'TF']] * 2
  assert len(set(versions)) == 2, rows


# What scripts/setup_env.sh hashes to know an install is up to date.
_SETUP_FILES = ('scripts/setup_env.sh', 'scripts/train.sh', 'constraints.txt',
                'constraints-tf221.txt', 'setup.cfg', 'setup.py',
                'estimator_trainer/listen_shim.c')


@pytest.mark.slow
def test_train_sh_on_one_stack_then_the_other(tmp_path, fashion_mnist_dir):
  """The README's order: `bash scripts/train.sh`, later `STACK=tf221 bash
  scripts/train.sh`; each stack's default engine on a model_dir of its own.
  In a copy of the scripts, so that runs/ is the test's; the installs are
  the two stacks' own (up to date: nothing installs)."""
  root = scripts_dir.SCRIPTS.parent
  for name in _SETUP_FILES:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / name, tmp_path / name)
  here = 'tf215' if stack.has_estimator() else 'tf221'
  venvs = {here: sys.executable, ('tf221' if here == 'tf215' else 'tf215'):
           OTHER}
  for name in ('tf215', 'tf221'):
    result = subprocess.run(
        ['bash', str(tmp_path / 'scripts' / 'train.sh'),
         f'--idx_dir={fashion_mnist_dir}', '--mode=train',
         '--train_steps=10'],
        env={**os.environ, 'STACK': name,
             'VENV': os.path.dirname(os.path.dirname(venvs[name]))},
        capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
  for run in ('fashion_mnist', 'fashion_mnist_tf221'):
    assert tf.train.latest_checkpoint(str(tmp_path / 'runs' / run)).endswith(
        'ckpt-10')
