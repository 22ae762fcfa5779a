"""Third-party noise hidden where it is emitted (console.py): in the CLI's
processes and in the test suite's (issue 75, item 5). What the CLI prints of
a run is test_run.py's."""

import importlib.util
import logging
import os
import pathlib
import subprocess
import sys
import warnings

import pytest

TESTS = pathlib.Path(__file__).resolve().parent

# What a GPU build of TensorFlow prints at import and first use on a
# machine without GPUs (2.15: cuDNN, cuFFT, cuBLAS; 2.21: cuInit).
_STARTUP_WORDS = ('Unable to register', 'cuInit', 'TensorRT')


def _python(code, cwd=None):
  env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
      [str(TESTS.parent), str(TESTS), os.environ.get('PYTHONPATH', '')])}
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # As a shell without it.
  return subprocess.run([sys.executable, '-c', code], cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=300,
                        check=False)


def test_the_suites_processes_print_no_tensorflow_startup_lines():
  """scripts/test.sh printed three `Unable to register cuDNN/cuFFT/cuBLAS
  factory` lines before its total: xdist's workers import TensorFlow in
  conftest.py outside any test's capture."""
  result = _python('import conftest', cwd=TESTS)
  assert result.returncode == 0, result.stderr[-3000:]
  assert not [line for line in result.stderr.splitlines()
              if any(word in line for word in _STARTUP_WORDS)], result.stderr


def test_the_coordinators_eval_strategy_warning_is_hidden(caplog,
                                                         monkeypatch):
  """Each cluster worker of the estimator engine printed the distribute
  coordinator's warning that it evaluates without a strategy, which is what
  the package does unless --eval_strategy names one. The same logger's
  other warnings stay. In this process, the global state quiet_tensorflow
  sets put back: its filter on the logger drops the record before any
  handler, the console's or caplog's (the console's start-up, what a
  process adds: the other tests here)."""
  from estimator_trainer import console  # pylint: disable=g-import-not-at-top
  from tensorflow.python.platform import tf_logging  # pylint: disable=g-import-not-at-top
  loggers = [logging.getLogger(name) for name in ('tensorflow', 'absl')]
  filters = [list(logger.filters) for logger in loggers]
  monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '2')  # Its setdefault's.
  try:
    with warnings.catch_warnings():
      console.quiet_tensorflow(verbose=False)
      # distribute_coordinator.run_distribute_coordinator's words.
      tf_logging.warning('`eval_strategy` is not passed in. No distribution '
                         'strategy will be used for evaluation.')
      tf_logging.warning('another warning')
  finally:
    for logger, kept in zip(loggers, filters):
      logger.filters[:] = kept
  assert 'another warning' in caplog.text
  assert 'eval_strategy' not in caplog.text


def test_the_docs_data_scripts_print_no_tensorflow_startup_lines(tmp_path):
  """scripts/make_census_like.py (the tabular guide's first command)
  printed TensorFlow's start-up lines and google-api-core's FutureWarning
  before its summary; scripts/write_tfrecords.py (the README's) likewise."""
  result = _python(
      'import runpy, sys\n'
      f"sys.argv = ['make_census_like.py', '--output_dir={tmp_path}', "
      "'--rows=40', '--num_shards=1']\n"
      f"runpy.run_path({str(TESTS.parent / 'scripts' / 'make_census_like.py')!r},"
      " run_name='__main__')\n")
  assert result.returncode == 0, result.stderr[-3000:]
  noise = [line for line in result.stderr.splitlines()
           if any(word in line for word in (*_STARTUP_WORDS, 'Warning'))]
  assert not noise, result.stderr
  assert (tmp_path / 'train-00000-of-00001.csv').exists()



@pytest.mark.both_stacks
@pytest.mark.parametrize('module', ['beam_scoring', 'beam_statistics'])
def test_a_beam_command_prints_its_help_alone_or_names_the_missing_extra(
    module):
  """`python -m estimator_trainer.tabular.beam_scoring` and
  `beam_statistics` (even `--help`) printed TensorFlow's start-up lines
  (oneDNN, cuDNN/cuFFT/cuBLAS) that the CLI and infer hide; without the
  `beam` extra (the 2.21 stack) they ended in ModuleNotFoundError's
  traceback. Each runs as `__main__`, as `-m` runs it."""
  result = _python('import runpy, sys\n'
                   f'sys.argv = [{module!r}, "--help"]\n'
                   f'runpy.run_module("estimator_trainer.tabular.{module}", '
                   'run_name="__main__", alter_sys=True)\n')
  if importlib.util.find_spec('apache_beam'):
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith('usage: python -m estimator_trainer.'
                                    f'tabular.{module}'), result.stdout
    noise = [line for line in result.stderr.splitlines()
             if any(word in line for word in (*_STARTUP_WORDS, 'oneDNN'))]
    assert not noise, result.stderr
  else:
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.startswith(
        'error: this command needs the beam extra (pip install '
        '"estimator-trainer[beam]"): no module apache_beam'), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
