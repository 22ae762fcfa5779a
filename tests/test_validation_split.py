"""--validation_fraction: early stopping on a held-out part of the TRAINING
records, the best validation step's weights restored at the end (issue 72).

The runs' data makes each split tell a different story, so that which one
decided shows: the validation records' label is x, the training records'
3x (a record's split is its hash bucket's, so each line is written by the
rule of the split its own text falls in), the evaluation file's -x. The
model walks from 0 towards 3x: the validation loss falls, then rises once
the weight passes 1 (its best mid-run), while the evaluation loss only
rises (its best the first evaluation: a rule on it would stop at the
third).
"""

import json
import logging
import os
import signal
import types

import numpy as np
import pytest
import tensorflow as tf

import engine_params
from cli_config import config_from, main_in_process, run_in_process
from cluster_launch import launch, task_lines
from estimator_trainer import best_weights
from estimator_trainer import early_stopping
from estimator_trainer import errors
from estimator_trainer import export_policy
from estimator_trainer import layout
from estimator_trainer import run_record
from estimator_trainer.sources import TEST, TRAIN
from estimator_trainer.tabular import splits
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.spec import Column, FeatureSpec

VALIDATION_FRACTION = 0.3  # With --eval_files: buckets [0, 300).
PATIENCE = 2
EVERY = 10  # Steps between checkpoints, each evaluated.


def _lines(rows, rng):
  """`rows` CSV lines 'x,y' of the training files: y = x where the line's
  bucket is a validation one, else 3x."""
  low, high = splits.Buckets(None, VALIDATION_FRACTION).ranges[TRAIN]
  lines = []
  while len(lines) < rows:
    x = rng.normal()
    for line, keep in ((f'{x:.5f},{x:.5f}', lambda b: b < low),
                       (f'{x:.5f},{3 * x:.5f}', lambda b: low <= b < high)):
      if keep(splits.bucket(tf.constant([line])).numpy()[0]):
        lines.append(line)
        break
  return lines


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  directory = tmp_path_factory.mktemp('validation_data')
  rng = np.random.default_rng(0)
  (directory / 'train.csv').write_text(
      'x,y\n' + '\n'.join(_lines(400, rng)) + '\n')
  (directory / 'eval.csv').write_text('x,y\n' + ''.join(
      f'{x:.5f},{-x:.5f}\n' for x in rng.normal(size=100)))
  return directory


def _argv(data, model_dir, engine, *more):
  return [f'--model_dir={model_dir}', f'--train_files={data}/train.csv',
          f'--eval_files={data}/eval.csv', '--label_key=y',
          f'--engine={engine}', f'--validation_fraction={VALIDATION_FRACTION}',
          f'--early_stopping_evals={PATIENCE}', '--train_steps=300',
          f'--save_checkpoints_steps={EVERY}', '--throttle_secs=0',
          '--batch_size_per_replica=32', '--learning_rate=0.02',
          '--keep_checkpoint_max=1', *more]


def _records(source, split):
  lines = []
  for batch in source.records(split).batch(1024):
    lines.extend(batch.numpy().tolist())
  return lines


@pytest.mark.parametrize('eval_files', [False, True])
def test_the_validation_records_are_apart_from_training_and_eval_and_stable(
    tmp_path, eval_files):
  """Every training-file record is in one split: evaluation (when held out
  too), validation or training, about the fractions asked; the same
  records whatever the files' order (each its own hash)."""
  rows = [f'{i},{i % 2}' for i in range(2000)]  # Distinct records.
  for name, part in (('a.csv', rows[:1000]), ('b.csv', rows[1000:])):
    (tmp_path / name).write_text('x,y\n' + '\n'.join(part) + '\n')
  spec = FeatureSpec(columns=(Column('x', 'float_normalized'),), label='y',
                     head='binary')
  test_files = str(tmp_path / 'b.csv') if eval_files else None

  def splits_of(pattern):
    source = TabularSource({TRAIN: pattern, TEST: test_files}, spec,
                           eval_fraction=0.2, validation_fraction=0.25)
    return {'train': _records(source, TRAIN),
            'validation': _records(source.validation(), TEST),
            'eval': [] if eval_files else _records(source, TEST)}

  parts = splits_of(f'{tmp_path}/a.csv,{tmp_path}/b.csv')
  seen = [line for part in parts.values() for line in part]
  assert len(seen) == len(set(seen)) == 2000  # Disjoint, and all of them.
  training = 2000 * (1 if eval_files else 0.8)
  assert abs(len(parts['validation']) - 0.25 * training) < 0.05 * training
  again = splits_of(f'{tmp_path}/b.csv,{tmp_path}/a.csv')
  assert {name: sorted(part) for name, part in again.items()} == {
      name: sorted(part) for name, part in parts.items()}


def _best_validation_step(model_dir):
  """The step of the best validation loss logged (read from the event
  files, not through the package's ranking): the first of equal ones."""
  losses = layout.read_scalars(str(model_dir / 'eval_validation'))[
      'average_loss']
  return min(losses, key=lambda point: (point[1], point[0]))[0], losses


# ctl on TensorFlow 2.21 too: its CheckpointManager reads the checkpoint
# state that the restore rewrites.
@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.engines_with(
    both_stacks=('ctl',)))
def test_it_stops_on_the_validation_part_and_restores_its_best_step(
    tmp_path, data, engine, caplog):
  """The best validation step's weights are the run's result: metrics.json,
  the latest checkpoint (predictions) and the final export are of it, and
  the console says so; the stop came PATIENCE evaluations after it, though
  the evaluation split's best was the first (never the rule's).
  --export=best (estimator, keras) ranks by the validation score too: its
  newest export is of the best validation step, not of the first."""
  model_dir = tmp_path / 'model'
  export = 'final' if engine == 'ctl' else 'best'
  with caplog.at_level(logging.INFO, logger='estimator_trainer'):
    run_in_process(_argv(data, model_dir, engine, f'--export={export}'))
  best, losses = _best_validation_step(model_dir)
  steps = [step for step, _ in losses]
  evals = dict(layout.read_scalars(str(model_dir / 'eval'))['average_loss'])
  assert min(evals, key=evals.get) == EVERY  # The eval split's best: first.
  assert EVERY < best < steps[-1] < 300, losses
  assert steps[-1] == best + PATIENCE * EVERY  # The validation rule's stop.
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == best
  assert layout.checkpoint_step(
      tf.train.latest_checkpoint(str(model_dir))) == best
  exports = sorted((model_dir / 'export' / export).iterdir())
  assert json.loads((exports[-1] / export_policy.RECORD).read_text())[
      'global_step'] == best
  assert (f'Early stopping: restored step {best}, the best on the '
          'validation split') in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.KINDS)
def test_a_run_resumed_after_ctrl_c_keeps_the_best_so_far(
    tmp_path, data, engine, monkeypatch):
  """Ctrl-C one evaluation after the best: the resumed run counts on from
  the evaluations before (it stops at the next one) and restores the best
  step kept before the interruption, whose checkpoint the rotation
  (--keep_checkpoint_max=1) has removed from model_dir."""
  model_dir = tmp_path / 'model'
  after = best_weights.Best.after

  def interrupted(self, checkpoint_path, result):
    stop = after(self, checkpoint_path, result)
    if self.kept['step'] < result['global_step']:  # One past the best.
      os.kill(os.getpid(), signal.SIGINT)
    return stop

  monkeypatch.setattr(best_weights.Best, 'after', interrupted)
  with pytest.raises((KeyboardInterrupt, SystemExit)):
    run_in_process(_argv(data, model_dir, engine))
  monkeypatch.setattr(best_weights.Best, 'after', after)
  assert not (model_dir / 'metrics.json').exists()
  best, _ = _best_validation_step(model_dir)
  stopped = layout.checkpoint_step(tf.train.latest_checkpoint(str(model_dir)))
  assert best < stopped
  assert not list(model_dir.glob(f'*ckpt-{best}.index'))  # Rotated out.
  run_in_process(_argv(data, model_dir, engine))
  assert _best_validation_step(model_dir)[0] == best
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'global_step'] == best
  scores = early_stopping.eval_accuracies(str(model_dir / 'eval_validation'))
  assert early_stopping.evaluations_since_best(scores) == PATIENCE


@pytest.mark.slow
@pytest.mark.serial
def test_two_workers_stop_together_and_restore_the_chiefs_best(tmp_path,
                                                               data):
  """multi_worker_mirrored (ctl; keras runs the same controller): both
  workers evaluate the validation part together and decide alike, stop on
  the same evaluation, and restore the best step from the chief's copy
  (the other's checkpoints are scratch); the chief alone keeps files."""
  model_dir = tmp_path / 'model'
  result = launch(['--workers=2'], _argv(
      data, model_dir, 'ctl', '--strategy=multi_worker_mirrored',
      '--batch_size_per_replica=16', '--cluster_timeout_secs=120'))
  assert result.returncode == 0, result.stdout[-5000:]
  best, losses = _best_validation_step(model_dir)
  assert EVERY < best < losses[-1][0] < 300, losses
  restored = task_lines(result.stdout, f'Early stopping: restored step {best},')
  assert set(restored) == {'worker:0', 'worker:1'}, result.stdout[-5000:]
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'global_step'] == best
  assert layout.checkpoint_step(
      tf.train.latest_checkpoint(str(model_dir))) == best
  assert not list(model_dir.glob('tmp_*'))


@pytest.mark.parametrize('recorded', [None, 0.3, 'absent'])
def test_a_model_dir_trained_on_other_records_refuses_another_fraction(
    tmp_path, data, recorded):
  """A model_dir whose checkpoints were trained with another validation
  part, or none (a run without the flag, or recorded before it), trained on
  records the flag would hold out: a usage error naming the difference."""
  model_dir = tmp_path / 'model'
  argv = _argv(data, model_dir, 'ctl')
  config = config_from([flag for flag in argv if 'validation' not in flag]
                       + ['--early_stopping_evals=2'])
  run = run_record.of(config)
  if recorded == 'absent':
    del run['validation_fraction']
  else:
    run['validation_fraction'] = recorded
  model_dir.mkdir()
  (model_dir / 'model.json').write_text(json.dumps(
      {'model': 'linear', 'model_kwargs': None, 'run': run}))
  (model_dir / 'checkpoint').write_text('model_checkpoint_path: "ckpt-10"\n')
  with pytest.raises(errors.UsageError, match=(
      '--validation_fraction=0.2 disagrees with .*, whose checkpoints are of '
      + ('--validation_fraction=0.3' if recorded == 0.3 else
         'a run without --validation_fraction'))):
    config_from([*argv, '--validation_fraction=0.2'])


_IMAGES = ['--dataset=mnist', '--validation_fraction=0.2',
           '--early_stopping_evals=2']


@pytest.mark.parametrize('flags, message', [
    (_IMAGES, 'error: --validation_fraction is for structured data'),
    (['--validation_fraction=1', '--early_stopping_evals=2'],
     'error: --validation_fraction=1.0: a fraction of the training records, '
     'between 0 and 1'),
    (['--validation_fraction=0', '--early_stopping_evals=2'],
     'error: --validation_fraction must be > 0, got 0.0'),
    (['--validation_fraction=0.2'],
     'error: --validation_fraction needs --early_stopping_evals=N'),
    (['--validation_fraction=0.001', '--early_stopping_evals=2'],
     'error: --validation_fraction=0.001: no records of'),
    # The estimator engine's workers follow an evaluator's (or the chief's)
    # evaluations: not yet.
    pytest.param(['--validation_fraction=0.2', '--early_stopping_evals=2',
                  '--engine=estimator', '--strategy=multi_worker_mirrored'],
                 'error: --validation_fraction in a cluster: only the TF2 '
                 'engines', marks=pytest.mark.estimator),
])
def test_bad_combinations_are_one_line_usage_errors(tmp_path, data, capfd,
                                                     flags, message):
  # Five records, none in the one bucket of a fraction of 0.001.
  (tmp_path / 'five.csv').write_text(
      'x,y\n' + ''.join(f'{x},{3 * x}\n' for x in range(5)))
  train = [] if flags is _IMAGES else [
      f'--train_files={tmp_path}/five.csv', f'--eval_files={data}/eval.csv',
      '--label_key=y']
  cluster = json.dumps({'cluster': {'worker': ['127.0.0.1:1', '127.0.0.1:2']},
                        'task': {'type': 'worker', 'index': 0}})
  code, stderr = main_in_process(
      [f'--model_dir={tmp_path}/model', *train, *flags], capfd,
      env={'TF_CONFIG': cluster} if '--engine=estimator' in flags else None)
  assert code == 2, stderr
  assert message in stderr
  assert 'Traceback' not in stderr


@pytest.mark.estimator
def test_tfx_trainer_fn_refuses_it(tmp_path, data):
  """TFX's Trainer calls tf.estimator.train_and_evaluate itself, which would
  end on the last step with no final export: a one-line refusal."""
  import estimator_trainer  # pylint: disable=g-import-not-at-top
  args = types.SimpleNamespace(
      serving_model_dir=str(tmp_path), train_files=[f'{data}/train.csv'],
      eval_files=[f'{data}/eval.csv'], train_steps=1,
      custom_config={'label_key': 'y', 'validation_fraction': 0.2,
                     'early_stopping_evals': 2})
  with pytest.raises(errors.UsageError,
                     match='^validation_fraction: not in trainer_fn'):
    estimator_trainer.trainer_fn(args, schema=None)
