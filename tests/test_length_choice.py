"""A structured dnn / wide_deep run that gives no length, on a table small
enough that the recipe's floor would set it, chooses the floor, twice or
four times it by k-fold cross-validation on the training records
(length_choice.py, --cv_fold runs), records the choice as its
--train_steps and resumes without choosing again (issue 72)."""

import json
import logging
import os
import re
import shutil

import numpy as np
import pytest

from cli_config import config_from, main_in_process
from estimator_trainer import config_checks
from estimator_trainer import layout
from estimator_trainer import length_choice
from estimator_trainer.errors import UsageError
from estimator_trainer.sources import TEST, TRAIN
from estimator_trainer.tabular import splits

FLOOR = 40  # The test's floor: steps of a few seconds.


def _table(path, rows, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(rows, 2))
  label = (x[:, 0] - x[:, 1] + rng.normal(size=rows) > 0).astype(int)
  path.write_text('a,b,label\n' + ''.join(
      f'{a:.4f},{b:.4f},{y}\n' for (a, b), y in zip(x, label)))
  return str(path)


@pytest.mark.parametrize('eval_fraction', [None, 0.2])
def test_the_folds_part_the_training_buckets(eval_fraction):
  buckets = np.arange(splits.HOLDOUT_BUCKETS)
  start = round((eval_fraction or 0) * splits.HOLDOUT_BUCKETS)
  tests = []
  for fold in range(1, 6):
    part = splits.Buckets(eval_fraction, fold=(fold, 5))
    train, test = part.kept(buckets, TRAIN), part.kept(buckets, TEST)
    assert not (train & test).any()
    assert np.array_equal(train | test, buckets >= start)  # Eval's unread.
    assert part.test_from_training
    tests.append(test)
  assert np.array_equal(sum(t.astype(int) for t in tests),
                        (buckets >= start).astype(int))  # Disjoint, all.
  assert sorted(int(t.sum()) for t in tests) == [(1000 - start) // 5] * 5


def test_cv_fold_is_checked(tmp_path):
  table = _table(tmp_path / 't.csv', 10)
  base = [f'--model_dir={tmp_path}/m', f'--train_files={table}']
  assert config_from([*base, '--cv_fold=2,5']).cv_fold == (2, 5)
  for argv, message in (
      (['--cv_fold=6,5'], r'--cv_fold=6,5: fold K of N'),
      (['--cv_fold=1,1'], r'--cv_fold=1,1: fold K of N'),
      (['--cv_fold=1,5', '--validation_fraction=0.2',
        '--early_stopping_evals=2'], r'--cv_fold with --validation_fraction')):
    with pytest.raises(UsageError, match=message):
      config_from([*base, *argv])
  with pytest.raises(UsageError, match=r'--cv_fold is for structured data'):
    config_from([f'--model_dir={tmp_path}/i', '--cv_fold=1,5'])


def test_which_runs_choose(tmp_path):
  """Those the floor sets the length of: 10 epochs of the training files'
  records are fewer steps (2,000 at batch 64: 12,800 records), of dnn and
  wide_deep, without a length, stopping rule, warm start or cluster."""
  small, large, tiny = (_table(tmp_path / f'{n}.csv', n)
                        for n in (3000, 12800, 99))
  def floor(table, *argv):
    config = config_from([f'--model_dir={tmp_path}/m', f'--train_files={table}',
                          '--model=dnn', *argv])
    return length_choice._floor(config)  # pylint: disable=protected-access
  assert floor(small) == (2000, 3000)
  assert floor(small, '--model=wide_deep') == (2000, 3000)
  assert floor(large) == (None, None)
  assert floor(tiny) == (None, None)  # Under MIN_RECORDS: folds of a few rows.
  assert floor(small, '--batch_size_per_replica=16') == (2000, 3000)
  assert floor(small, '--batch_size_per_replica=8') == (None, None)  # 1,600.
  for argv in (['--model=linear'], ['--train_steps=100'],
               ['--train_epochs=3'], ['--cv_fold=1,5'],
               ['--validation_fraction=0.2', '--early_stopping_evals=2'],
               ['--mode=evaluate']):
    assert floor(small, *argv) == (None, None), argv


def _one_se(losses):
  """The shortest candidate within one standard error (of the paired
  per-fold differences) of the lowest mean: the test's own reading."""
  means = {steps: np.mean(by) for steps, by in losses.items()}
  best = losses[min(means, key=means.get)]
  return min(steps for steps, by in losses.items()
             if np.mean(np.subtract(by, best)) <= np.std(
                 np.subtract(by, best), ddof=1) / np.sqrt(len(by)))


# The choice runs above the engines (engines.Engine.run), the same for
# each: one engine (the estimator engine's fold runs were compared with
# ctl's on the benchmark's tables, docs/guide/tabular-measurements.md), on
# the default stack: the choice is this package's logic over runs and
# files whose TensorFlow calls the 2.21 stack's tests make (45 CPU-seconds
# there).
@pytest.mark.slow
@pytest.mark.default_stack_only
def test_a_small_tables_run_chooses_records_and_resumes(
    tmp_path, capfd, caplog, monkeypatch):
  monkeypatch.setattr(config_checks, 'min_structured_steps', lambda _: FLOOR)
  monkeypatch.setattr(length_choice, 'FOLDS', 2)
  monkeypatch.setattr(length_choice, 'FACTORS', (1, 2))
  monkeypatch.setattr(length_choice, 'MIN_RECORDS', 60)
  caplog.set_level(logging.INFO, logger='estimator_trainer')
  table = _table(tmp_path / 't.csv', 60)
  model_dir = tmp_path / 'run'
  argv = [f'--model_dir={model_dir}', f'--train_files={table}', '--model=dnn',
          '--engine=ctl', '--batch_size_per_replica=16',
          '--export=none']
  code, err = main_in_process(argv, capfd)
  assert code == 0, err
  assert 'fewer steps than the dnn floor of 40: choosing 40, 80 steps' in (
      caplog.text)
  chosen = int(re.search(r'chose (\d+) steps', caplog.text).group(1))
  losses = {}
  for steps in (40, 80):
    for fold in (1, 2):
      run = os.path.join(layout.length_dir(model_dir),
                         f'steps{steps}_fold{fold}')
      with open(layout.metrics_file(run)) as f:
        metrics = json.load(f)
      assert metrics['global_step'] == steps
      with open(layout.model_file(run)) as f:
        assert json.load(f)['run']['cv_fold'] == [fold, 2]
      losses.setdefault(steps, []).append(metrics['average_loss'])
  assert chosen == _one_se(losses)
  with open(layout.model_file(model_dir)) as f:
    assert json.load(f)['run']['train_steps'] == chosen
  with open(layout.metrics_file(model_dir)) as f:
    assert json.load(f)['global_step'] == chosen

  caplog.clear()
  code, err = main_in_process(argv, capfd)  # The same command: resumes.
  assert code == 0, err
  assert f'--train_steps={chosen}' in caplog.text
  assert 'Length:' not in caplog.text


  # Stopped after the folds, before a checkpoint: chosen again from the
  # fold runs that finished, none run again.
  for path in model_dir.iterdir():
    if path.name != layout.LENGTH_DIR:
      shutil.rmtree(path) if path.is_dir() else path.unlink()
  caplog.clear()
  code, err = main_in_process(argv, capfd)
  assert code == 0, err
  assert f'chose {chosen} steps' in caplog.text
  assert ' of 4 runs)' not in caplog.text


@pytest.mark.slow
@pytest.mark.default_stack_only
def test_a_usage_error_of_the_fold_runs_is_the_runs_own(tmp_path, capfd,
                                                        monkeypatch):
  """wide_deep on numbers alone fails when its model is built, which a fold
  run does first: the run's usage error, as with --train_steps, not a fold
  run's failure; the model_dir it made is gone."""
  monkeypatch.setattr(config_checks, 'min_structured_steps', lambda _: FLOOR)
  monkeypatch.setattr(length_choice, 'MIN_RECORDS', 60)
  table = _table(tmp_path / 't.csv', 60)
  model_dir = tmp_path / 'run'
  code, err = main_in_process(
      [f'--model_dir={model_dir}', f'--train_files={table}',
       '--model=wide_deep', '--engine=ctl', '--batch_size_per_replica=16',
       '--export=none'], capfd)
  assert code == UsageError.exit_code, err
  assert err.strip().splitlines()[-1] == (
      'error: --model wide_deep: no categorical, hashed or discretized '
      'column for the wide part (use --model=dnn)')
  assert not model_dir.exists()


def test_fold_runs_of_other_flags_run_again(tmp_path):
  directory = tmp_path / 'length'
  length_choice._start_over_unless_same(str(directory), ['--seed=1'])  # pylint: disable=protected-access
  (directory / 'steps40_fold1').mkdir()
  length_choice._start_over_unless_same(str(directory), ['--seed=1'])  # pylint: disable=protected-access
  assert (directory / 'steps40_fold1').exists()  # The same: kept.
  length_choice._start_over_unless_same(str(directory), ['--seed=2'])  # pylint: disable=protected-access
  assert not (directory / 'steps40_fold1').exists()


def test_the_rule_takes_a_longer_length_only_where_the_folds_agree():
  sure = {2000: [0.3, 0.6, 0.41], 4000: [0.25, 0.55, 0.35],
          8000: [0.2, 0.5, 0.3]}
  assert length_choice.choices(sure)[:2] == (8000, 8000)
  noisy = {2000: [0.3, 0.6, 0.31], 4000: [0.25, 0.55, 0.4],
           8000: [0.2, 0.5, 0.4]}
  assert length_choice.choices(noisy)[:2] == (8000, 2000)
  middle = {2000: [0.3, 0.6, 0.41], 4000: [0.21, 0.495, 0.302],
            8000: [0.2, 0.5, 0.3]}
  assert length_choice.choices(middle)[:2] == (8000, 4000)
