"""Ctrl-C and SIGTERM at each moment of a run's end (after its last
checkpoint's save: the final evaluation, the export, metrics.json): the
run stops at once with the step saved, and the rerun does what is left,
keeping an export of that step rather than writing a second one.

The signal comes from the code at that moment (signal.raise_signal in a
wrapper of the function the moment begins with): its handler runs before
the next line of Python, so the moment is exact, with no sleep.
"""

import contextlib
import dataclasses
import logging
import signal
from unittest import mock

import pytest
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import engines
from estimator_trainer import errors
from estimator_trainer import export_policy
from estimator_trainer import outputs
from estimator_trainer.config import TrainConfig
import builders

STEPS = 5

ENGINES = [pytest.param('estimator', marks=pytest.mark.estimator), 'ctl',
           'keras']
# The engines whose own code runs the moments after training: in keras
# they are Controller.finish's, as in ctl; keras's own moment is the last
# checkpoint's save, inside fit's loop.
AFTER_TRAINING = ENGINES[:2]


def _config(model_dir, idx_dir, engine):
  return TrainConfig(
      model_dir=str(model_dir), engine=engine, dataset='mnist',
      idx_dir=str(idx_dir), model=builders.mlp, train_steps=STEPS,
      save_checkpoints_steps=STEPS, steps_per_loop=STEPS, export='final')


@pytest.fixture
def signals_ignored():
  """SIGINT and SIGTERM ignored by the test process where the code under
  test handles neither (a signal it misses leaves the run going on, a
  failure, instead of ending pytest)."""
  def ignore(signum, frame):
    del signum, frame
  previous = {signum: signal.signal(signum, ignore)
              for signum in (signal.SIGINT, signal.SIGTERM)}
  yield ignore
  for signum, handler in previous.items():
    signal.signal(signum, handler)


def _signal_in(owner, name, signum, after=None):
  """Patches owner.name to raise `signum` as it begins, or, with `after`,
  as it returns when after(kwargs) holds."""
  original = getattr(owner, name)

  def wrapper(*args, **kwargs):
    if after is None:
      signal.raise_signal(signum)
    result = original(*args, **kwargs)
    if after is not None and after(kwargs):
      signal.raise_signal(signum)
    return result
  return mock.patch.object(owner, name, wrapper)


def _moment(moment, engine, signum):
  """The patch that raises `signum` at `moment` of a run's end."""
  if moment == 'saved':  # Just after the last checkpoint's save.
    if engine == 'estimator':
      return _signal_in(tf.compat.v1.train.Saver, 'save', signum,
                        after=lambda kwargs: kwargs['global_step'] == STEPS)
    return _signal_in(tf.train.CheckpointManager, 'save', signum,
                      after=lambda kwargs: kwargs['checkpoint_number'] ==
                      STEPS)
  if moment == 'evaluation':
    if engine == 'estimator':
      return _signal_in(tf.estimator.Estimator, 'evaluate', signum)
    from estimator_trainer.tf2 import evaluation  # pylint: disable=g-import-not-at-top
    return _signal_in(evaluation.Evaluator, 'evaluate', signum)
  if moment == 'export':  # Written whole, before its rename into place.
    return _signal_in(export_policy, '_publish', signum)
  assert moment == 'metrics'
  return _signal_in(outputs, 'write_metrics', signum)


def _exports(model_dir):
  return sorted(str(path.parent) for path in
                model_dir.glob('export/final/*/saved_model.pb'))


def _run(config, caplog, patch=contextlib.nullcontext()):
  """The run's result (its exception) and its log messages."""
  caplog.clear()
  with caplog.at_level(logging.INFO, logger='estimator_trainer'), patch:
    try:
      result = engines.ENGINES[config.engine].run(config)
    except KeyboardInterrupt as e:
      result = e
  return result, [record.getMessage() for record in caplog.records]


_STOPPED = {signal.SIGINT: 'Interrupted', signal.SIGTERM: 'Preempted'}


def _check_stopped(model_dir, result, messages, signum):
  """The run stopped at once: at the last step, saved, without
  metrics.json or any temporary export left."""
  if signum == signal.SIGINT:
    assert isinstance(result, errors.Interrupted)
  else:
    assert result is None
  said = f'{_STOPPED[signum]} at step {STEPS}: saved a checkpoint there'
  assert [m for m in messages if m.startswith(said)], messages
  assert checkpoints.latest_step(str(model_dir)) == STEPS
  assert not (model_dir / 'metrics.json').exists()
  assert list(model_dir.glob(
      f'export/*/{export_policy.TEMPORARY_PREFIX}*')) == []


_MOMENTS = ['saved', 'evaluation', 'export', 'metrics']


def _signals_at():
  """(engine, signum, moment): Ctrl-C at every moment in the estimator
  and ctl engines and at keras's own (AFTER_TRAINING); SIGTERM, which
  shares its handler and differs only in what stop_signals.stopped does
  after the save (no Interrupted), at the evaluation's in those two and,
  in the slow suite, at every moment in ctl's."""
  for engine in ENGINES:
    name, = getattr(engine, 'values', (engine,))
    marks = tuple(getattr(engine, 'marks', ()))
    own = engine in AFTER_TRAINING
    for moment in _MOMENTS if own else ['saved']:
      yield pytest.param(name, signal.SIGINT, moment, marks=marks,
                         id=f'{name}-sigint-{moment}')
      if own and (moment == 'evaluation' or name == 'ctl'):
        slow = () if moment == 'evaluation' else (pytest.mark.slow,)
        yield pytest.param(name, signal.SIGTERM, moment, marks=marks + slow,
                           id=f'{name}-sigterm-{moment}')


def _stopped_at_the_end_then_rerun(model_dir, config, caplog, engine, moment,
                                   signum, signals_ignored):
  """Runs `config`, `signum` sent at `moment` of its end: it stops at once,
  with the test process's handlers back; then its rerun finishes, with one
  export of the step (the one written before the signal, kept). Returns the
  exports of the stopped run and the rerun's messages."""
  result, messages = _run(config, caplog, _moment(moment, engine, signum))
  _check_stopped(model_dir, result, messages, signum)
  exported = _exports(model_dir)
  assert len(exported) == (moment == 'metrics')
  assert signal.getsignal(signal.SIGINT) is signals_ignored
  assert signal.getsignal(signal.SIGTERM) is signals_ignored
  metrics, messages = _run(config, caplog)
  assert metrics['global_step'] == STEPS
  assert _exports(model_dir) == (exported or _exports(model_dir))
  assert len(_exports(model_dir)) == 1
  return exported, messages


@pytest.mark.parametrize('engine, signum, moment', list(_signals_at()))
def test_a_signal_at_the_end_stops_at_once_and_the_rerun_exports_once(
    tmp_path, mnist_small_dir, engine, moment, signum, caplog,
    signals_ignored):
  model_dir = tmp_path / 'model'
  config = _config(model_dir, mnist_small_dir, engine)
  exported, messages = _stopped_at_the_end_then_rerun(
      model_dir, config, caplog, engine, moment, signum, signals_ignored)
  assert (model_dir / 'metrics.json').exists()
  if exported:
    assert f'Kept {exported[0]}, the export of step {STEPS}' in messages


@pytest.mark.parametrize('engine', AFTER_TRAINING)
def test_ctrl_c_in_the_rerun_s_final_evaluation_stops_it_too(
    tmp_path, mnist_small_dir, engine, caplog, signals_ignored):
  """The rerun of a run stopped at its end (training_progress.finish_ended)
  is stopped as that run was; the next rerun finishes."""
  model_dir = tmp_path / 'model'
  config = _config(model_dir, mnist_small_dir, engine)
  _run(config, caplog, _moment('metrics', engine, signal.SIGINT))
  exported = _exports(model_dir)
  result, messages = _run(config, caplog,
                          _moment('evaluation', engine, signal.SIGINT))
  _check_stopped(model_dir, result, messages, signal.SIGINT)
  metrics, _ = _run(config, caplog)
  assert metrics['global_step'] == STEPS
  assert _exports(model_dir) == exported
  del signals_ignored


@pytest.mark.parametrize('engine, signum, moment', [
    # TensorFlow's handler on both stacks.
    *(pytest.param('ctl', signal.SIGTERM, moment,
                   marks=pytest.mark.both_stacks) for moment in _MOMENTS),
    # Passed on to TensorFlow's handler as a SIGTERM (preemption.watch).
    pytest.param('ctl', signal.SIGINT, 'evaluation',
                 marks=pytest.mark.both_stacks),
    ('keras', signal.SIGTERM, 'saved')])  # Its own moment (AFTER_TRAINING).
def test_a_signal_at_the_end_of_a_multi_worker_mirrored_run_stops_it(
    tmp_path, mnist_small_dir, engine, moment, signum, caplog,
    signals_ignored):
  """Under multi_worker_mirrored TensorFlow's PreemptionCheckpointHandler
  holds SIGTERM while training, and acts only between steps: at the end the
  run takes it back (preemption.watch), and stops as on other strategies."""
  model_dir = tmp_path / 'model'
  config = dataclasses.replace(_config(model_dir, mnist_small_dir, engine),
                               strategy='multi_worker_mirrored')
  _stopped_at_the_end_then_rerun(model_dir, config, caplog, engine, moment,
                                 signum, signals_ignored)
