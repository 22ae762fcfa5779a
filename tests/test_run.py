"""The CLI as users run it: a subprocess per command (a later run whose
console and exit code nothing reads, or whose lines a test reads from the
package's logger: in-process, from the same flags)."""

import dataclasses
import json
import logging
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from estimator_trainer.sources import TEST, TRAIN
from estimator_trainer.tabular import infer
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular import spec as spec_lib
from conftest import MNIST_SMALL_TEST_EXAMPLES


def _run(*flags, timeout=600, env=None):
  return subprocess.run(
      [sys.executable, '-m', 'estimator_trainer.run', *flags],
      capture_output=True, text=True, timeout=timeout, check=False, env=env)


def _error_line(result):
  assert 'Traceback' not in result.stderr
  return result.stderr.strip().splitlines()[-1]


def test_help_lists_the_flags():
  result = _run('--help')  # absl's --help exits 1, by its convention.
  for flag in ('--model_dir', '--strategy', '--eval_strategy',
               '--cpu_replicas', '--global_batch_size', '--train_epochs',
               '--mode', '--idx_dir', '--data_dir'):
    assert flag in result.stdout
  # The summary and --model name structured data's models too (issue 47).
  summary = ' '.join(result.stdout.split('\nflags:')[0].split())
  assert 'structured data' in summary
  assert '--model=linear, dnn, wide_deep' in summary
  assert '[structured data] The JSON (or YAML) file' in ' '.join(
      result.stdout.split())


@pytest.mark.estimator
@pytest.mark.slow
def test_train_evaluate_predict_on_real_fashion_mnist(tmp_path,
                                                      mnist_small_dir):
  """100 steps with 2 replicas, then evaluate without any strategy. Real
  Fashion-MNIST images: mnist_small_dir's (its test split the first 2,000 of
  the 10,000 it trains on; test_data.py reads the real test split). The
  training run is the command's process, at --verbosity=0 the quiet side of
  Estimator's console check (deprecation notices and GPU start-up lines only
  with --verbosity=1); the evaluate run, from the model_dir's record, its
  verbose side, a process too (TensorFlow's import lines in it). The export
  and predict runs in-process."""
  model_dir = tmp_path / 'model'
  result = _run(f'--model_dir={model_dir}', '--strategy=mirrored',
                '--cpu_replicas=2', '--eval_strategy=mirrored',
                '--train_steps=100', '--save_checkpoints_steps=50',
                '--throttle_secs=0', '--export=best',
                f'--idx_dir={mnist_small_dir}', '--verbosity=0',
                env=_console_env())
  assert result.returncode == 0, result.stderr[-3000:]
  trained = json.loads((model_dir / 'metrics.json').read_text())
  assert trained['global_step'] == 100
  assert trained['num_examples'] == MNIST_SMALL_TEST_EXAMPLES
  assert trained['accuracy'] > 0.75
  assert list((model_dir / 'eval').glob('events.out.tfevents.*'))
  assert list(model_dir.glob('events.out.tfevents.*'))
  # Evaluated at steps 50 and 100: the best one(s) exported.
  assert list(model_dir.glob('export/best/*/saved_model.pb'))

  evaluated = _run(f'--model_dir={model_dir}', '--mode=evaluate',
                   '--verbosity=1', env=_console_env())
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  restored = json.loads((model_dir / 'metrics.json').read_text())
  assert restored['accuracy'] == trained['accuracy']
  assert restored['loss'] == pytest.approx(trained['loss'], rel=1e-5)
  _check_console(
      {0: result.stderr, 1: evaluated.stderr},
      noise=('is deprecated and will be removed', 'Instructions for updating:',
             'Unable to register cuDNN factory', 'Calling model_fn',
             'Graph was finalized'),
      needed=(f'Data: fashion_mnist from IDX files in {mnist_small_dir}',
              # Not a terminal: plain progress lines, ending at the last step.
              'step 100/100 (100%) train loss (label-smoothed) ',
              'Saving checkpoints for 100 into',
              'Saving dict for global step 100: accuracy = '))
  assert (len(result.stderr.splitlines()) <
          len(evaluated.stderr.splitlines()) / 5)

  _run_in_process(f'--model_dir={model_dir}', '--mode=export')
  assert len(list(model_dir.glob('export/manual/*/saved_model.pb'))) == 1

  _run_in_process(f'--model_dir={model_dir}', '--mode=predict',
                  '--num_predictions=25')
  rows = [json.loads(line)
          for line in (model_dir / 'predictions.jsonl').read_text().splitlines()]
  assert [r['index'] for r in rows] == list(range(25))
  # Predicted classes of a trained model mostly match the test labels.
  labels = _fashion_mnist_test_labels(mnist_small_dir)[:25]
  hits = sum(r['class'] == label for r, label in zip(rows, labels))
  assert hits >= 15


def _console_env():
  """As a user starts a run: no TF_CPP_MIN_LOG_LEVEL (conftest sets one)."""
  return {k: v for k, v in os.environ.items()
          if k not in ('TF_CPP_MIN_LOG_LEVEL', 'TF_CONFIG')}


def _console_flags(tmp_path, mnist_small_dir, verbosity, *flags):
  return (f'--model_dir={tmp_path}/console{verbosity}', '--dataset=mnist',
          f'--idx_dir={mnist_small_dir}', '--train_steps=20',
          f'--verbosity={verbosity}', *flags)


def _console(tmp_path, mnist_small_dir, verbosity, *flags):
  """stderr of a short run's process at `verbosity`."""
  result = _run(*_console_flags(tmp_path, mnist_small_dir, verbosity, *flags),
                env=_console_env())
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stderr


def _check_console(outputs, noise, needed):
  """`noise` only with --verbosity=1; what a person needs always."""
  for text in noise:
    assert text not in outputs[0], text
    assert text in outputs[1], text
  for text in ('Config: ', 'Exported a SavedModel to', 'Final evaluation (in ',
               *needed):
    assert text in outputs[0], text


@pytest.mark.slow
def test_tf2_console_hides_saved_model_internals_unless_verbose(
    tmp_path, mnist_small_dir, capfd, caplog):
  """TensorFlow's SavedModel and checkpoint INFO lines (logged through absl)
  only with --verbosity=1; evaluations read as Estimator's, on any NumPy.
  The quiet run is the command's process; the verbose one run.main
  in-process, its lines every logger's records from DEBUG up, as absl's
  handler prints them at --verbosity=1 (the quiet console's filters would
  drop them before capture): a real verbose console, TensorFlow's import
  lines in it, is the Estimator console check's."""
  import cli_config  # pylint: disable=g-import-not-at-top
  quiet = _console(tmp_path, mnist_small_dir, 0, '--engine=ctl')
  caplog.set_level(logging.DEBUG)
  code, stderr = cli_config.main_in_process(
      list(_console_flags(tmp_path, mnist_small_dir, 1, '--engine=ctl')),
      capfd)
  assert code == 0, stderr[-3000:]
  outputs = {0: quiet, 1: caplog.text}
  _check_console(
      outputs, noise=('Found untraced functions', 'Writing fingerprint'),
      needed=('Data: mnist from IDX files', 'Saved checkpoint ',
              'Evaluation at step 20 ('))
  assert re.search(r'Evaluation at step 20 \(.*\): accuracy = 0\.\d+, ',
                   outputs[0])
  assert 'np.float' not in outputs[0]
  # Its loss is metrics.json's (the mean per example), not the mean of the
  # batches' means (issue 76, item 5), which is batch_mean_loss there too.
  logged = dict(re.findall(r'(\w+) = ([-\d.e]+)', re.search(
      r'Evaluation at step 20 .*', outputs[0]).group(0)))
  final = json.loads((tmp_path / 'console0' / 'metrics.json').read_text())
  for name in ('loss', 'batch_mean_loss', 'average_loss'):
    assert math.isclose(float(logged[name]), final[name], rel_tol=1e-5), (
        name, logged, final)
  # Quiet, the console is the package's lines (the verbose run logs the same
  # ones) and nothing of TensorFlow's: a bound, unlike a fifth of the
  # verbose run's lines, that matplotlib's lines (cached in a process once
  # it drew) do not move.
  own = [record for record in caplog.records
         if record.name.startswith('estimator_trainer') and
         record.levelno >= logging.INFO]
  assert len(quiet.splitlines()) <= len(own), quiet
  # Logged at import by TensorFlow 2.21 on oneDNN CPUs (AVX-512 ones), past
  # TF_CPP_MIN_LOG_LEVEL.
  assert 'oneDNN custom operations' not in outputs[0]


def _fashion_mnist_test_labels(directory):
  import gzip
  with gzip.open(directory / 't10k-labels-idx1-ubyte.gz') as f:
    return list(f.read()[8:])


def _config_from(argv):
  import cli_config  # pylint: disable=g-import-not-at-top
  return cli_config.config_from(argv)


def test_config_file_sets_flags_that_the_command_line_overrides(tmp_path):
  path = tmp_path / 'hparams.yaml'
  path.write_text('learning_rate: 0.01\noptimizer: sgd\ntrain_steps: 7\n')
  config = _config_from([f'--config={path}', '--train_steps=9',
                         '--model_dir=/tmp/m'])
  assert (config.learning_rate, config.optimizer, config.train_steps) == (
      0.01, 'sgd', 9)
  path = tmp_path / 'hparams.json'
  path.write_text('{"shuffle_buffer": 0, "lr_decay": "none"}')
  config = _config_from([f'--config={path}'])
  assert config.shuffle_buffer == 0 and config.lr_decay == 'none'


def test_config_file_maps_and_lists_for_model_kwargs_and_shapes(tmp_path):
  path = tmp_path / 'hparams.yaml'
  path.write_text('model: resnet20\nmodel_kwargs: {hidden: 8}\n'
                  'image_size: [32, 30]\nsync_batch_norm: true\n')
  config = _config_from([f'--config={path}'])
  assert (config.model, config.model_kwargs, config.image_size,
          config.sync_batch_norm) == ('resnet20', {'hidden': 8}, (32, 30),
                                      True)
  config = _config_from(['--model_kwargs={"hidden": 4}', '--image_size=8,9'])
  assert (config.model_kwargs, config.image_size) == ({'hidden': 4}, (8, 9))


def test_job_dir_is_an_alias_of_model_dir():
  assert _config_from(['--job_dir=/tmp/job']).model_dir == '/tmp/job'


@pytest.mark.parametrize('content, message', [
    ('{"learning_rate": ', 'not valid JSON/YAML'),
    ('{"no_such_flag": 1}', "unknown flag 'no_such_flag'"),
    ('{"train_steps": "many"}', 'train_steps'),
    ('[1, 2]', 'must map flag names to values'),
])
def test_bad_config_file_exits_2(tmp_path, content, message):
  path = tmp_path / 'bad.json'
  path.write_text(content)
  result = _run(f'--model_dir={tmp_path}/m', f'--config={path}')
  assert result.returncode == 2
  assert message in _error_line(result)


@pytest.mark.default_stack_only
@pytest.mark.slow
def test_a_csv_without_a_spec_trains_on_the_inferred_one(tmp_path, capfd,
                                                        caplog):
  """Issue 45: `run --train_files=a.csv --label_key=y` infers the spec,
  prints its choices, stores it in the model_dir and trains (it was the
  image path's "TFRecords need dataset_spec.json beside them"), evaluating
  on a held-out fifth of the file, which evaluating the model_dir later
  holds out again; --feature_spec still wins."""
  rng = np.random.default_rng(0)
  for part, rows in (('train', 100), ('eval', 20)):
    x = rng.normal(size=rows)
    lines = ['x,shop,y'] + [f'{v:.4f},{"ab"[i % 2]},{int(v > 0) + 1}'
                            for i, v in enumerate(x)]
    (tmp_path / f'{part}.csv').write_text('\n'.join(lines) + '\n')
  flags = (f'--train_files={tmp_path}/train.csv', '--model=linear',
           '--train_steps=5', '--export=none')
  model_dir = tmp_path / 'model'
  # run.main in-process, its lines from the package's logger: a real
  # process's console is the console tests', and a CSV run's
  # test_rows_without_a_label_stop_the_run_or_are_skipped's.
  import cli_config  # pylint: disable=g-import-not-at-top
  caplog.set_level(logging.INFO, logger='estimator_trainer')
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={model_dir}', *flags, '--label_key=y'], capfd)
  assert code == 0, stderr[-2000:]
  assert 'No --feature_spec: the spec inferred from' in caplog.text
  assert ('label y: binary (2 distinct integers, not 0..K-1: the label '
          'vocabulary, sorted: 1, 2)') in caplog.text
  assert '(20.0% of the records held out for evaluation)' in caplog.text
  stored = spec_lib.read(str(model_dir / 'preprocessing/feature_spec.json'))
  assert stored == infer.infer(f'{tmp_path}/train.csv', 'y')[0]
  held_out = TabularSource({TRAIN: f'{tmp_path}/train.csv', TEST: None},
                           stored, eval_fraction=0.2).num_examples(TEST)
  assert 5 <= held_out <= 35
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['num_examples'] == held_out
  # The next two through the command's own flag handling (run.main's but
  # the console).
  _run_in_process(f'--model_dir={model_dir}', '--mode=evaluate')
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'num_examples'] == held_out
  flags += (f'--eval_files={tmp_path}/eval.csv',)
  # A spec given wins (it names the label: --label_key would be a usage
  # error): the shop as hashed ids, the label 1/2 as its classes.
  given = dataclasses.replace(stored, columns=(
      spec_lib.Column('shop', 'string_hashed', num_bins=4),))
  (tmp_path / 'spec.json').write_text(spec_lib.to_json(given))
  model_dir = tmp_path / 'given'
  _run_in_process(f'--model_dir={model_dir}', *flags,
                  f'--feature_spec={tmp_path}/spec.json')
  assert spec_lib.read(
      str(model_dir / 'preprocessing/feature_spec.json')) == given


def _run_in_process(*flags):
  import cli_config  # pylint: disable=g-import-not-at-top
  cli_config.run_in_process(list(flags))


@pytest.mark.slow
def test_rows_without_a_label_stop_the_run_or_are_skipped(tmp_path, caplog,
                                                         capfd):
  """Issue 47, item 8: an empty label cell stops `run` (and infer, for the
  spec) with one line naming the file, line and flag;
  --skip_rows_without_label trains on the others and says how many it
  left out. Both through run.main in-process: a data error's one line from
  a real process is test_bad_input.py's (REAL_CLI, e.g.
  tabular-string-in-float-column)."""
  import cli_config  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  lines = ['x,y'] + [f'{v:.4f},{"" if i in (4, 9) else int(v > 0)}'
                     for i, v in enumerate(rng.normal(size=60))]
  (tmp_path / 'train.csv').write_text('\n'.join(lines) + '\n')
  flags = (f'--train_files={tmp_path}/train.csv', '--label_key=y',
           '--train_steps=5', '--export=none')
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={tmp_path}/failed', *flags], capfd)
  assert code == 1, stderr[-2000:]
  assert 'Traceback' not in stderr
  assert stderr.strip().splitlines()[-1] == (
      f"error: {tmp_path}/train.csv line 6, column 'y': no label (an empty "
      'cell); --skip_rows_without_label leaves such records out')
  # The run that skips them, its lines from the package's logger (the
  # console of a real process is the console tests').
  caplog.set_level(logging.INFO, logger='estimator_trainer')
  _run_in_process(f'--model_dir={tmp_path}/model', *flags,
                  '--skip_rows_without_label')
  assert ('--skip_rows_without_label: left out 2 records without a label '
          f'in {tmp_path}/train.csv') in caplog.text
  assert '2 records without a label left out' in caplog.text
  metrics = json.loads((tmp_path / 'model/metrics.json').read_text())
  assert 0 < metrics['num_examples'] < 58
