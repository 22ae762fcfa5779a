"""A run started again after its training ended (a rerun of the same
command): it says so and changes nothing, or does only what is left."""

import dataclasses
import gc
import logging
import types

import pytest

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import engines
from estimator_trainer import training_progress
from estimator_trainer.config import TrainConfig
import builders

STEPS = 5

ENGINES = [pytest.param('estimator', marks=pytest.mark.estimator), 'ctl',
           'keras']


def _config(model_dir, idx_dir, engine, mode='train_and_evaluate',
            cluster=None):
  # A small MLP: what a rerun does is the model's whatever it is, and the
  # CNN's convolutions made most of the two evaluations on 2,000 images.
  return TrainConfig(
      model_dir=str(model_dir), mode=mode, engine=engine, dataset='mnist',
      idx_dir=str(idx_dir), model=builders.mlp, train_steps=STEPS,
      save_checkpoints_steps=STEPS, steps_per_loop=STEPS, export='final',
      cluster=cluster)


def _run(model_dir, idx_dir, engine, mode='train_and_evaluate'):
  return engines.ENGINES[engine].run(_config(model_dir, idx_dir, engine,
                                             mode))


def _files(model_dir):
  """{path: (size, mtime)} of every file under model_dir."""
  return {str(path.relative_to(model_dir)): (path.stat().st_size,
                                             path.stat().st_mtime_ns)
          for path in model_dir.rglob('*') if path.is_file()}


def _exports(model_dir):
  return sorted(model_dir.glob('export/final/*/saved_model.pb'))


def _rerun(model_dir, idx_dir, engine, caplog, mode='train_and_evaluate',
           run=None):
  """The rerun's (or `run()`'s) result and its log messages, the TensorFlow
  objects it left collected (a checkpoint's restore warns as it is
  deleted)."""
  caplog.clear()
  with caplog.at_level(logging.INFO, logger='estimator_trainer'), \
      caplog.at_level(logging.INFO, logger='absl'):
    result = run() if run else _run(model_dir, idx_dir, engine, mode)
    gc.collect()
  return result, [record.getMessage() for record in caplog.records]


def _evaluator_restarted(model_dir, idx_dir, engine, caplog):
  """The evaluator task of a one-worker cluster whose training ended (its
  train spec and finished mark written as the worker writes them),
  restarted."""
  evaluator = _config(model_dir, idx_dir, engine, cluster=cluster_lib.Cluster(
      jobs={'worker': ['localhost:1']}, task_type='evaluator', task_index=0,
      has_evaluator=True))
  chief = training_progress.TrainingProgress(dataclasses.replace(
      evaluator, cluster=dataclasses.replace(evaluator.cluster,
                                             task_type='worker')))
  chief.write_train_spec(STEPS, global_batch_size=64)
  chief.mark_finished(STEPS)
  return _rerun(model_dir, idx_dir, engine, caplog,
                run=lambda: engines.ENGINES[engine].run(evaluator))


def _unrestored(messages):
  return [m for m in messages if 'could not be found' in m]


@pytest.mark.slow
@pytest.mark.parametrize('engine', ENGINES)
def test_a_finished_run_rerun_changes_nothing_or_does_what_is_left(
    tmp_path, mnist_small_dir, engine, caplog):
  model_dir = tmp_path / 'model'
  metrics = _run(model_dir, mnist_small_dir, engine)
  assert metrics['global_step'] == STEPS
  assert len(_exports(model_dir)) == 1
  files = _files(model_dir)

  # The same command again: one line, nothing evaluated, exported, written.
  result, messages = _rerun(model_dir, mnist_small_dir, engine, caplog)
  assert _unrestored(messages) == []
  assert result == metrics
  assert _files(model_dir) == files
  said = [m for m in messages if m.startswith('Training already finished')]
  assert said == [
      f'Training already finished at step {STEPS} and '
      f'{model_dir}/metrics.json holds its final evaluation: nothing left to '
      'do (--mode=evaluate or --mode=export evaluate or export it again)']

  # --mode=train: nothing to train either.
  step, messages = _rerun(model_dir, mnist_small_dir, engine, caplog,
                          mode='train')
  assert step == STEPS
  assert _unrestored(messages) == []
  assert _files(model_dir) == files
  assert f'Training already finished at step {STEPS}: nothing left to do' in (
      messages)

  # An evaluator task restarted after the end: nothing either.
  result, messages = _evaluator_restarted(model_dir, mnist_small_dir, engine,
                                          caplog)
  assert result == metrics
  assert {name: stat for name, stat in _files(model_dir).items()
          if name != 'train_spec.json' and not name.startswith('finished')
          } == files
  assert [m for m in messages if m.startswith('Training already finished')
          ] == said

  # Killed before metrics.json was written: the rerun evaluates, and keeps
  # the export of that step (export_policy: no second one).
  exported = _exports(model_dir)
  (model_dir / 'metrics.json').unlink()
  result, messages = _rerun(model_dir, mnist_small_dir, engine, caplog)
  assert _unrestored(messages) == []
  assert (f'Training already finished at step {STEPS}: its final evaluation '
          'and export are left') in messages
  assert result['global_step'] == STEPS
  assert result['accuracy'] == pytest.approx(metrics['accuracy'])
  assert (model_dir / 'metrics.json').exists()
  assert _exports(model_dir) == exported
  # No training: no new checkpoint or training events.
  assert {name for name in _files(model_dir) if name.startswith(
      ('ckpt-', 'model.ckpt-', 'events.'))} == {
          name for name in files if name.startswith(
              ('ckpt-', 'model.ckpt-', 'events.'))}


def test_a_rerun_with_more_steps_serves_by_the_new_train_spec(tmp_path,
                                                             monkeypatch):
  """A parameter server of a rerun with more --train_steps reads the new
  run's train spec, not the last run's, which is there (with its finished
  marks) until the new chief writes its own: here while the server waits."""
  cluster = cluster_lib.Cluster(
      jobs={'chief': ['localhost:1'], 'ps': ['localhost:2']},
      task_type='ps', task_index=0, has_evaluator=False)
  first = dataclasses.replace(_config(tmp_path, tmp_path, 'ctl'),
                              strategy='parameter_server', cluster=cluster)
  rerun = dataclasses.replace(first, train_steps=2 * STEPS)

  def chief(config):
    return training_progress.TrainingProgress(dataclasses.replace(
        config, cluster=dataclasses.replace(cluster, task_type='chief')))

  chief(first).write_train_spec(STEPS, global_batch_size=64)
  chief(first).mark_finished(STEPS)
  monkeypatch.setattr(training_progress, 'time', types.SimpleNamespace(
      sleep=lambda _: chief(rerun).write_train_spec(2 * STEPS, 64)))
  assert training_progress.TrainingProgress(rerun).read_max_steps(
      types.SimpleNamespace(kick=lambda: None)) == 2 * STEPS
