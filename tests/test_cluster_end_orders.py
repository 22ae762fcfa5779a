"""A cluster's chief SIGKILLed at the last step and restarted (a supervisor's
OnFailure), in every order of that kill and its peers' ends (issue 73, item
1): the restart finishes whatever the peers did meanwhile, and the tasks
that wait for the end (parameter servers, evaluator) see it."""

import dataclasses
import itertools
import json
import logging
from unittest import mock

import pytest
import tensorflow as tf

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import engines
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer import training_progress
from estimator_trainer.config import TrainConfig
import builders

STEPS = 5

# Where the chief's SIGKILL falls in its end: after the save of the last
# checkpoint (before its finished mark), after the mark (in its final
# evaluation), after metrics.json.
CHIEF_KILLED = ('after_the_last_checkpoint', 'after_its_finished_mark',
                'after_metrics_json')
# What its worker did: exited 0 before or after the chief's kill (its mark
# written either way), or was killed before its mark and is not back, or is
# restarted before or after the chief's restart.
WORKER = ('exited_0_before', 'exited_0_after', 'killed_not_back',
          'restarted_before_the_chief', 'restarted_after_the_chief')


def _cluster(task_type, ps=True):
  jobs = {'chief': ['localhost:1'], 'worker': ['localhost:2']}
  if ps:
    jobs['ps'] = ['localhost:3']
  return cluster_lib.Cluster(jobs=jobs, task_type=task_type, task_index=0,
                             has_evaluator=False)


def _config(model_dir, task_type, train_steps=STEPS):
  """A task of a cluster on parameter servers, whose end an estimator
  engine's ps tasks wait for as a TF2 engine's do (a multi-worker cluster
  ends alike: test_a_chief_killed_between_...)."""
  return TrainConfig(
      model_dir=str(model_dir), train_steps=train_steps, dataset='mnist',
      strategy='parameter_server', cluster=_cluster(task_type))


# Estimator's evaluation dict, as a final evaluation returns it.
_EVALUATION = {'global_step': STEPS, 'loss': 0.25, 'average_loss': 0.25}


def _save_checkpoint(model_dir, step):
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.)),
                             str(model_dir), 5).save(checkpoint_number=step)


def _restart(config, evaluations):
  """A task restarted after the end, as the engines start it: it must see
  training ended before anything that would wait for its peers."""
  assert training_progress.training_ended(config)
  return training_progress.finish_ended(config, lambda: evaluations.append(
      STEPS) or dict(_EVALUATION))


@pytest.mark.parametrize('chief_killed,worker',
                         itertools.product(CHIEF_KILLED, WORKER))
def test_a_chief_restarted_after_the_end_finishes_in_every_order(
    tmp_path, chief_killed, worker):
  chief, other = _config(tmp_path, 'chief'), _config(tmp_path, 'worker')
  chief_progress = training_progress.TrainingProgress(chief)
  chief_progress.write_train_spec(STEPS, global_batch_size=64)
  if worker == 'exited_0_before':
    training_progress.TrainingProgress(other).mark_finished(STEPS)
  _save_checkpoint(tmp_path, STEPS)
  if chief_killed != 'after_the_last_checkpoint':
    chief_progress.mark_finished(STEPS)
  if chief_killed == 'after_metrics_json':
    outputs.write_eval_metrics(str(tmp_path), dict(_EVALUATION))
  # The chief is killed here.
  if worker == 'exited_0_after':
    training_progress.TrainingProgress(other).mark_finished(STEPS)
  evaluations = []
  if worker == 'restarted_before_the_chief':
    assert _restart(other, evaluations) is None
  assert _restart(chief, evaluations) == outputs.as_metrics_json(
      _EVALUATION)
  if worker == 'restarted_after_the_chief':
    assert _restart(other, evaluations) is None
  # The final evaluation once, by the chief, unless metrics.json held it.
  assert evaluations == ([] if chief_killed == 'after_metrics_json'
                         else [STEPS])
  assert json.loads((tmp_path / 'metrics.json').read_text()) == (
      outputs.as_metrics_json(_EVALUATION))
  # What the parameter servers wait for: the TF2 engines' the chief's mark,
  # the estimator engine's every training task's (a worker killed before
  # its own is waited for until it is restarted).
  ps = training_progress.TrainingProgress(_config(tmp_path, 'ps'))
  assert ps.chief_finished(STEPS)
  assert ps.num_finished(STEPS) == (1 if worker == 'killed_not_back' else 2)


def test_a_rerun_with_more_steps_is_not_ended_by_the_last_checkpoint(
    tmp_path):
  """The last run's checkpoint at its max_steps ends nothing for a rerun
  with more --train_steps: its spec's length flags differ."""
  training_progress.TrainingProgress(_config(tmp_path, 'chief')
                                     ).write_train_spec(STEPS, 64)
  _save_checkpoint(tmp_path, STEPS)
  assert training_progress.training_ended(_config(tmp_path, 'chief'))
  assert not training_progress.training_ended(
      _config(tmp_path, 'chief', train_steps=2 * STEPS))


@pytest.mark.parametrize('engine', [
    pytest.param('estimator', marks=pytest.mark.estimator), 'ctl'])
def test_a_chief_killed_between_its_last_checkpoint_and_its_mark_finishes(
    tmp_path, mnist_small_dir, engine, caplog):
  """The issue's case, through the engine: the chief SIGKILLed after the
  save of the last checkpoint, its worker exited 0 meanwhile; restarted, it
  makes no multi-worker strategy (which would wait for the worker until its
  watchdog killed it), evaluates, exports and writes metrics.json."""
  alone = TrainConfig(
      model_dir=str(tmp_path), engine=engine, dataset='mnist',
      idx_dir=str(mnist_small_dir), model=builders.mlp, train_steps=STEPS,
      save_checkpoints_steps=STEPS, steps_per_loop=STEPS, export='final')
  expected = engines.ENGINES[engine].run(alone)
  # What the chief had left when it was killed: its mark, results, export.
  (tmp_path / 'metrics.json').unlink()
  tf.io.gfile.rmtree(str(tmp_path / 'export'))
  chief = dataclasses.replace(alone, strategy='multi_worker_mirrored',
                              cluster=_cluster('chief', ps=False))
  training_progress.TrainingProgress(chief).write_train_spec(STEPS, 64)
  training_progress.TrainingProgress(dataclasses.replace(
      chief, cluster=_cluster('worker', ps=False))).mark_finished(STEPS)
  with caplog.at_level(logging.INFO), mock.patch.object(
      tf.distribute.experimental, 'MultiWorkerMirroredStrategy',
      side_effect=AssertionError('the restarted chief made a multi-worker '
                                 'strategy')):
    result = engines.ENGINES[engine].run(chief)
  assert (f'Training already finished at step {STEPS}: its final evaluation '
          'and export are left') in caplog.text
  assert result['global_step'] == STEPS
  assert result['accuracy'] == pytest.approx(expected['accuracy'])
  assert json.loads((tmp_path / 'metrics.json').read_text()) == result
  assert len(list(tmp_path.glob('export/final/*/saved_model.pb'))) == 1
  assert (tmp_path / layout.finished_file('', 'chief', 0)).exists()
