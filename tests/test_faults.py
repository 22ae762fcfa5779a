"""Reliability: SIGKILL and resume, preemption (SIGTERM), NaN loss, a dead
worker. Real trainer processes, killed at real moments."""

import json
import logging
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import threading
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import checkpoints
from estimator_trainer import early_stopping
from estimator_trainer import faults
from estimator_trainer import layout
from estimator_trainer.config import TrainConfig
from estimator_trainer.watchdog import PS_LOST
from conftest import MNIST_SMALL_TEST_EXAMPLES
from cluster_launch import restart_alone_in_process
import cli_config
import scripts_dir
import tabular_sets
import warm_process

# Kills and signals trainers at real moments, and bounds how long they take.
pytestmark = pytest.mark.serial

_ENV = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}


_CLI = [sys.executable, '-m', 'estimator_trainer.run']


def _command(model_dir, idx_dir, *extra):
  return [*_CLI,
          f'--model_dir={model_dir}', '--dataset=mnist',
          f'--idx_dir={idx_dir}', *extra]


# The trainers _start launched, killed at the end of their test if still
# running: a test that fails leaves no process behind (each runs in a session
# of its own, out of reach of pytest's Ctrl-C).
_STARTED = []


@pytest.fixture(autouse=True)
def _no_trainer_left():
  yield
  while _STARTED:
    proc = _STARTED.pop()
    if proc.poll() is None:
      try:
        os.killpg(proc.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      proc.wait()


def _start(command, log, env=None):
  """The trainer in the background, its whole output in `log`."""
  with open(log, 'w') as f:
    proc = warm_process.popen(command, stdout=f, stderr=subprocess.STDOUT,
                              env=env or _ENV, start_new_session=True)
  _STARTED.append(proc)
  return proc


def _wait_until(proc, log, condition, what, timeout=300):
  """Polls `condition()` while the trainer `proc` runs; fails if it exits
  first or `timeout` s pass (a bound for a stuck run, not a schedule)."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if condition():
      return
    assert proc.poll() is None, log.read_text()[-3000:]
    time.sleep(0.1)
  proc.kill()
  pytest.fail(f'no {what} in {timeout} s:\n{log.read_text()[-3000:]}')


def _wait_for_line(proc, log, pattern):
  """Waits until `log` has a line matching `pattern`."""
  _wait_until(proc, log, lambda: re.search(pattern, log.read_text()),
              repr(pattern))


def _wait_for_checkpoint(proc, log, model_dir, step):
  """Waits until model_dir's latest checkpoint is at `step` or later."""
  def saved():
    return checkpoints.latest_step(str(model_dir)) >= step
  _wait_until(proc, log, saved, f'checkpoint at step {step}')


def _restored_step(log_text, model_dir):
  """The checkpoint a training run started from (its first restore)."""
  match = re.search(
      rf'Restoring parameters from {re.escape(str(model_dir))}/model\.ckpt-'
      r'(\d+)\n', log_text)
  assert match, log_text[-3000:]
  return int(match.group(1))


def _check_checkpoints(model_dir):
  """Every checkpoint the state lists restores, with finite weights; returns
  their steps."""
  state = tf.train.get_checkpoint_state(str(model_dir))
  assert state, f'no checkpoint in {model_dir}'
  steps = []
  for path in state.all_model_checkpoint_paths:
    reader = tf.train.load_checkpoint(path)
    for name, _ in tf.train.list_variables(path):
      # np.asarray: a TF2 checkpoint's object graph is bytes.
      value = np.asarray(reader.get_tensor(name))
      if np.issubdtype(value.dtype, np.floating):
        assert np.isfinite(value).all(), (path, name)
    steps.append(layout.checkpoint_step(path))
  assert layout.checkpoint_step(state.model_checkpoint_path) == max(steps)
  return steps


# What a stopped trainer exits with, and the line it logs: SIGTERM (a
# preemption) and Ctrl-C (SIGINT) stop it alike.
_STOPPED = {signal.SIGTERM: (0, 'Preempted'), signal.SIGINT: (130, 'Interrupted')}


def _preempt(proc, log, signum=signal.SIGTERM):
  """SIGTERMs (or `signum`s) the running trainer `proc`: it exits 0 (130 on
  SIGINT) within Kubernetes' default grace period (30 s), before a SIGKILL
  would come. Returns its log and how long it took to exit."""
  assert proc.poll() is None, log.read_text()[-3000:]
  signalled = time.monotonic()
  proc.send_signal(signum)
  returncode = proc.wait(timeout=120)
  seconds = time.monotonic() - signalled
  output = log.read_text()
  assert returncode == _STOPPED[signum][0], output[-3000:]
  assert seconds < 30
  return output, seconds


def _stopped_step(output, signum=signal.SIGTERM):
  """The step of the one line a stopped trainer logs."""
  lines = re.findall(r'.*(?:Preempted|Interrupted) at step.*', output)
  assert len(lines) == 1, output[-3000:]
  return int(re.search(
      rf'{_STOPPED[signum][1]} at step (\d+): saved a checkpoint there; run '
      r'the same command again to resume$', lines[0]).group(1))


def _rerun_to_the_end(command, model_dir, steps, caplog):
  """Runs `command` again, to `steps` and metrics.json, in this process
  (the CLI's flag handling, then its engine: a TensorFlow import less; the
  run it resumes was the real command), in the real command's environment;
  returns its log and metrics."""
  assert command[:len(_CLI)] == _CLI, command
  with caplog.at_level(logging.INFO), mock.patch.dict(os.environ, _ENV,
                                                      clear=True):
    cli_config.run_in_process(command[len(_CLI):])
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == steps
  return caplog.text, metrics


# --- SIGKILL ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.estimator
def test_sigkill_at_random_moments_then_the_same_command_resumes(
    tmp_path, mnist_small_dir, caplog):
  model_dir = tmp_path / 'model'
  # Frequent saves: a kill can land in one, or in a deletion of an old one
  # (2 kept: every save from the run after the first deletes one).
  # Each run is killed at a random moment of the 0.5 s after it announced a
  # save past the step it started from (the save itself follows that line):
  # 20 steps a run here (one save), at most ~110 at 150 steps/s, so that the
  # 2 runs never reach the end and the rerun has few steps to train. Two
  # runs: the second restores a killed run's checkpoint and is killed past
  # saves that delete, as a third would (a TensorFlow process more).
  steps = 400
  command = _command(model_dir, mnist_small_dir, f'--train_steps={steps}',
                     '--save_checkpoints_steps=20', '--keep_checkpoint_max=2',
                     '--export=none')
  rng = random.Random(20240521)
  latest = 0
  history = []  # (seconds before the kill, latest step after it)
  for attempt in range(2):
    log = tmp_path / f'run{attempt}.log'
    proc = _start(command, log)
    # Each run saves once as it starts (step 0, or the one it restored).
    _wait_for_line(proc, log, r'Saving checkpoints for \d+')
    if attempt > 0:
      assert _restored_step(log.read_text(), model_dir) == latest
    _wait_until(proc, log, lambda: max(map(int, re.findall(
        r'Saving checkpoints for (\d+)', log.read_text()))) > latest,
                f'a save past step {latest}')
    delay = rng.uniform(0, 0.5)
    time.sleep(delay)
    assert proc.poll() is None, log.read_text()[-3000:]
    proc.kill()
    proc.wait()
    _check_checkpoints(model_dir)
    step = checkpoints.latest_step(str(model_dir))
    assert latest <= step < steps and step > 0
    latest = step
    history.append((round(delay, 2), latest))
    assert not (model_dir / 'metrics.json').exists()

  rerun_log, metrics = _rerun_to_the_end(command, model_dir, steps, caplog)
  assert _restored_step(rerun_log, model_dir) == latest
  assert checkpoints.latest_step(str(model_dir)) == steps
  assert steps in _check_checkpoints(model_dir)
  assert metrics['num_examples'] == MNIST_SMALL_TEST_EXAMPLES
  print(f'(kill delay s, latest checkpoint) per kill: {history}')


# --- Preemption -------------------------------------------------------------


# SIGTERM and Ctrl-C share one handler (faults.py), the engines their own
# loops: each engine and each signal runs once alone (here and in the TF2
# section), each case a real run.


@pytest.mark.slow
@pytest.mark.estimator
def test_ctrl_c_saves_the_current_step_and_exits_130(
    tmp_path, mnist_small_dir):
  model_dir = tmp_path / 'model'
  # Checkpoints at step 0 and at the end only: whatever the Ctrl-C leaves is
  # the step it came at. Estimator logs the step every 10 steps (shown with
  # --verbosity=1): the Ctrl-C comes once training is past step 0 (it
  # stopped at step 30 here, on a quiet machine: the 470 left, ~3 s, leave
  # the signal's delivery a margin on a slower, loaded machine).
  steps = 500
  command = _command(model_dir, mnist_small_dir, f'--train_steps={steps}',
                     '--save_checkpoints_steps=100000', '--export=final',
                     '--log_step_count_steps=10', '--verbosity=1')
  log = tmp_path / 'stopped.log'
  proc = _start(command, log)
  _wait_for_line(proc, log, r'loss = .*, step = [1-9]')
  output, seconds = _preempt(proc, log, signal.SIGINT)
  assert 'Traceback' not in output
  step = _stopped_step(output, signal.SIGINT)
  assert 10 <= step < steps
  assert _check_checkpoints(model_dir) == [0, step]
  # Neither evaluated nor exported: training is not finished.
  assert not (model_dir / 'eval').exists()
  assert not (model_dir / 'export').exists()
  assert not (model_dir / 'metrics.json').exists()
  assert not (model_dir / layout.LOCK_FILE).exists()  # The rerun may run.
  print(f'Ctrl-C at step {step}: exit 130 after {seconds:.1f} s')
  # No rerun: the state a Ctrl-C leaves is asserted above, and its save is
  # SIGTERM's (stop_signals.StopSignals, one handler); the estimator's
  # resume from such a save to the final export is
  # test_sigterm_on_structured_data_saves_and_the_rerun_resumes[estimator]'s.


@pytest.mark.slow
@pytest.mark.parametrize('engine', [
    pytest.param('estimator', marks=pytest.mark.estimator),
    pytest.param('ctl', marks=pytest.mark.both_stacks)])
def test_sigterm_on_structured_data_saves_and_the_rerun_resumes(
    tmp_path, engine, caplog):
  """A wide & deep model with an optimizer per part, stopped by SIGTERM,
  saves its step (both optimizers' slots with it), and the same command
  resumes there to the end. On the census-like set's 3 columns of
  tabular_sets.narrowed: both parts, every kind of column, fewer graphs'
  worth of feature columns to build."""
  data = tabular_sets.narrowed(tabular_sets.write_census(tmp_path / 'data'),
                               tmp_path / 'narrowed')
  model_dir = tmp_path / 'model'
  # As in test_ctrl_c_saves_the_current_step_and_exits_130 (the
  # TF2 engines save no step 0). They stopped at steps 70-160 here, on a
  # quiet machine: 600 leave a wide margin, and the rerun few steps.
  steps = 600
  command = [*_CLI, f'--model_dir={model_dir}', f'--engine={engine}',
             f'--train_files={data.train_files}',
             f'--eval_files={data.eval_files}',
             f'--feature_spec={data.feature_spec}', '--model=wide_deep',
             '--model_kwargs={"hidden_units": [16, 8]}',
             '--optimizer=adagrad', '--linear_optimizer=ftrl',
             '--global_batch_size=16', f'--train_steps={steps}',
             '--save_checkpoints_steps=100000', '--export=final',
             '--log_step_count_steps=10', '--verbosity=1']
  log = tmp_path / 'stopped.log'
  proc = _start(command, log)
  _wait_for_line(proc, log, r'loss = .*, step = [1-9]')
  output, seconds = _preempt(proc, log)
  assert 'Traceback' not in output
  step = _stopped_step(output)
  assert 10 <= step < steps
  assert _check_checkpoints(model_dir) == (
      [0, step] if engine == 'estimator' else [step])
  # Each part's optimizer slots, saved with the step: Estimator's v1 slots
  # end with the optimizer's name, the TF2 Job's start with its part's.
  saved = [name for name, _ in tf.train.list_variables(
      tf.train.latest_checkpoint(str(model_dir)))]
  if engine == 'estimator':
    parts, holds = ('/Adagrad', '/Ftrl'), str.endswith
  else:
    parts, holds = ('optimizer/_variables/', 'linear_optimizer/_variables/'), (
        str.startswith)
  for part in parts:
    assert any(holds(name, part) for name in saved), (part, saved)
  # Neither evaluated nor exported: training is not finished. (The TF2
  # engines make model_dir/eval as they start.)
  assert not layout.read_scalars(str(model_dir / 'eval'))
  assert not (model_dir / 'export').exists()
  assert not (model_dir / 'metrics.json').exists()
  print(f'{engine}: SIGTERM at step {step}: exit 0 after {seconds:.1f} s')

  rerun_log, _ = _rerun_to_the_end(command, model_dir, steps, caplog)
  if engine == 'estimator':
    assert _restored_step(rerun_log, model_dir) == step
  else:
    assert f'Restoring {model_dir}/ckpt-{step}' in rerun_log
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1


def test_a_second_ctrl_c_stops_at_once(tmp_path):
  """The first Ctrl-C is recorded (training goes on to save its step); a
  second one ends the process at once, wherever its main thread is (here,
  10 min of sleep stand in for a TensorFlow call that a Python handler
  would wait for), saying so and exiting 130: it died of SIGINT, with no
  word (issue 47, item 7)."""
  script = ('import sys, time\n'
            'from estimator_trainer import stop_signals\n'
            'with stop_signals.StopSignals() as signals:\n'
            '  print("ready", flush=True)\n'
            '  while not signals.interrupted:\n'
            '    time.sleep(0.01)\n'
            '  print("saving", flush=True)\n'
            '  time.sleep(600)\n'
            'print("saved", flush=True)\n')
  proc = subprocess.Popen([sys.executable, '-c', script],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=_ENV, start_new_session=True)
  _STARTED.append(proc)
  assert proc.stdout.readline() == 'ready\n'
  proc.send_signal(signal.SIGINT)
  assert proc.stdout.readline() == 'saving\n'
  proc.send_signal(signal.SIGINT)
  assert proc.wait(timeout=60) == 130
  assert proc.stdout.read() == ''  # Nothing after.
  stderr = proc.stderr.read()
  assert 'Interrupted again: stopped at once' in stderr
  assert 'Traceback' not in stderr


def _model_fn(features, labels, mode, params):
  """w scaled by `growth` each step, on a loss that stays finite."""
  del labels
  w = tf.compat.v1.get_variable('w', initializer=1.0)
  loss = tf.reduce_mean(features['x']) * tf.minimum(tf.abs(w), 1.0)
  if mode == tf.estimator.ModeKeys.EVAL:
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'accuracy': tf.compat.v1.metrics.mean(loss)})
  step = tf.compat.v1.train.get_or_create_global_step()
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.group(
      w.assign(w * params['growth']), step.assign_add(1)))


def _input_fn(repeat=None):
  return lambda: tf.data.Dataset.from_tensors(
      ({'x': [1.0]}, [0])).repeat(repeat)


def _estimator(model_dir, growth, save_checkpoints_steps):
  return tf.estimator.Estimator(
      _model_fn, params={'growth': growth},
      config=tf.estimator.RunConfig(
          model_dir=str(model_dir),
          save_checkpoints_steps=save_checkpoints_steps))


class _SigtermAtStep(tf.compat.v1.train.SessionRunHook):

  def __init__(self, step):
    self._step = step

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def after_run(self, run_context, run_values):
    if run_context.session.run(self._global_step) == self._step:
      signal.raise_signal(signal.SIGTERM)


@pytest.fixture
def sigterm_ignored():
  """SIGTERM ignored by the test process, whatever the code under test does;
  yields that handler."""
  def ignore(signum, frame):
    del signum, frame
  previous = signal.signal(signal.SIGTERM, ignore)
  yield ignore
  signal.signal(signal.SIGTERM, previous)


@pytest.mark.estimator
def test_sigterm_just_after_a_periodic_save_skips_the_final_evaluation(
    tmp_path, sigterm_ignored):
  """No new save then: end() must still keep Estimator from evaluating."""
  model = _estimator(tmp_path, growth=1.0, save_checkpoints_steps=3)
  result = faults.train_and_evaluate(
      model,
      tf.estimator.TrainSpec(_input_fn(), max_steps=100,
                             hooks=[_SigtermAtStep(6)]),
      # Throttled: step 3 is evaluated (the first), step 6 is not.
      tf.estimator.EvalSpec(_input_fn(repeat=2), steps=None,
                            start_delay_secs=0, throttle_secs=3600))
  assert result is None
  assert _check_checkpoints(tmp_path) == [0, 3, 6]
  assert list(early_stopping.eval_accuracies(model.eval_dir())) == [3]
  assert signal.getsignal(signal.SIGTERM) is sigterm_ignored


@pytest.mark.estimator
def test_training_outside_the_main_thread_runs_without_the_sigterm_handler(
    tmp_path):
  """Only the main thread may set signal handlers."""
  model = _estimator(tmp_path, growth=1.0, save_checkpoints_steps=3)
  thread = threading.Thread(target=faults.train, args=(
      model, _input_fn(), 5, []))
  thread.start()
  thread.join()
  assert _check_checkpoints(tmp_path) == [0, 3, 5]


# --- NaN and Inf ------------------------------------------------------------


@pytest.mark.estimator
def test_weights_that_overflow_are_never_checkpointed(tmp_path):
  """Inf weights under a finite loss, caught as they are about to be saved."""
  model = _estimator(tmp_path, growth=1e30, save_checkpoints_steps=1)
  with pytest.raises(faults.DivergedError, match=(
      r'^weights are NaN or Inf at step 2: training diverged \(a lower '
      r'--learning_rate may help\); the latest checkpoint is still '
      r'model\.ckpt-1$')):
    faults.train(model, _input_fn(), max_steps=10, hooks=[])
  assert _check_checkpoints(tmp_path) == [0, 1]


@pytest.mark.slow
def test_nan_loss_fails_with_the_step_and_keeps_the_last_good_checkpoint(
    estimator,    tmp_path, mnist_small_dir):
  model_dir = tmp_path / 'model'
  sgd = ['--optimizer=sgd', '--lr_decay=none', '--save_checkpoints_steps=50']
  # 100 good steps, in this process for speed...
  estimator.train(TrainConfig(
      model_dir=str(model_dir), mode='train', dataset='mnist',
      idx_dir=str(mnist_small_dir), optimizer='sgd', lr_decay='none',
      learning_rate=0.1, train_steps=100, save_checkpoints_steps=50))
  assert _check_checkpoints(model_dir) == [0, 50, 100]
  # ... then resumed at a learning rate that blows up within a few steps.
  result = warm_process.run(
      _command(model_dir, mnist_small_dir, *sgd, '--learning_rate=1e6',
               '--train_steps=400'), 600, _ENV)
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  match = re.fullmatch(
      r'error: loss is (NaN|Inf) at step (\d+): training diverged \(a lower '
      r'--learning_rate may help\); the latest checkpoint is still '
      r'model\.ckpt-100', last_line)
  assert match, result.stderr[-3000:]
  assert 100 < int(match.group(2)) < 150
  # The rerun saved step 100 again as it started, then nothing.
  assert _check_checkpoints(model_dir) == [0, 50, 100]
  assert not (model_dir / 'metrics.json').exists()


# --- A dead worker ----------------------------------------------------------


def _start_task(command, log, cluster, index, task_type='worker'):
  """Task `task_type:index` of `cluster`, as a supervisor (re)starts it."""
  return _start(command, log, env={**_ENV, 'TF_CONFIG': json.dumps(
      {'cluster': cluster, 'task': {'type': task_type, 'index': index}})})


def _start_cluster(command, logs, cluster=None):
  """Two workers; not through the launcher, which would stop the survivor."""
  cluster = cluster or scripts_dir.load('local_cluster').make_cluster(
      False, 2, 0, False)[0]
  return [_start_task(command, log, cluster, index)
          for index, log in enumerate(logs)]


def _kill_a_worker_while_training(command, model_dir, tmp_path):
  """Starts `command`'s two workers, kills worker 1 once a checkpoint after
  step 0 is whole, checks the chief's exit (the cause in one line, at once)
  and the checkpoints; returns the latest one's step."""
  logs = [tmp_path / 'chief.log', tmp_path / 'worker.log']
  chief, worker = _start_cluster(command, logs)
  # Its first checkpoint after step 0 whole (step 20; 50 steps took 0.8 s
  # here: the steps left, 180 or more, leave the kill a margin on a slower,
  # loaded machine).
  _wait_until(chief, logs[0],
              lambda: checkpoints.latest_step(str(model_dir)) > 0,
              'checkpoint after step 0')
  worker.kill()
  assert chief.wait(timeout=120) == 1
  worker.wait()
  output = logs[0].read_text()
  assert 'Traceback' not in output
  assert output.strip().splitlines()[-1] == (
      'error: a peer of this multi_worker_mirrored task stopped or became '
      'unreachable while training, which ends training for every task: '
      'restart the whole cluster; it resumes from the latest checkpoint')
  _check_checkpoints(model_dir)
  return checkpoints.latest_step(str(model_dir))


@pytest.mark.estimator
@pytest.mark.slow
def test_a_worker_killed_while_training_fails_the_other_then_the_cluster_resumes(
    tmp_path, mnist_small_dir, caplog):
  """The cluster restarted resumes; its chief, stopped by SIGTERM in its
  final evaluation (at once, as a cluster task of this engine: under
  multi_worker_mirrored TensorFlow's preemption notifier had taken SIGTERM,
  and the chief evaluated and exported on), is restarted alone and finishes
  it."""
  model_dir = tmp_path / 'model'
  # The bound covers each task's start-up to its first step (its peer's
  # included): 20 s ran out once before the kill, on this 2-core machine
  # under a load average of 7. The kill does not wait for it: the chief's
  # collective ops are aborted for good, and it says so at once.
  command = _command(model_dir, mnist_small_dir,
                     '--strategy=multi_worker_mirrored', '--train_steps=200',
                     '--save_checkpoints_steps=20', '--cluster_timeout_secs=40')
  latest = _kill_a_worker_while_training(command, model_dir, tmp_path)

  cluster = scripts_dir.load('local_cluster').make_cluster(
      False, 2, 0, False)[0]
  restarted = [tmp_path / 'chief2.log', tmp_path / 'worker2.log']
  chief, worker = _start_cluster(command, restarted, cluster)
  # The chief marks training finished, then evaluates: stopped there.
  _wait_until(chief, restarted[0], (model_dir / 'finished' / 'worker-0.json'
                                    ).exists, "the chief's finished mark")
  chief.send_signal(signal.SIGTERM)
  assert chief.wait(timeout=120) == -signal.SIGTERM
  assert worker.wait(timeout=300) == 0, restarted[1].read_text()[-3000:]
  assert _restored_step(restarted[0].read_text(), model_dir) == latest
  assert checkpoints.latest_step(str(model_dir)) == 200
  assert not (model_dir / 'metrics.json').exists()  # Killed in time.
  assert not (model_dir / 'export').exists()

  # Restarted, each alone: the worker has nothing left to do, the chief the
  # final evaluation, export and metrics.json.
  output = restart_alone_in_process(command, cluster, 1, caplog)
  assert ('Training already finished at step 200: nothing left to do for '
          'worker:1') in output
  output = restart_alone_in_process(command, cluster, 0, caplog)
  assert ('Training already finished at step 200: its final evaluation and '
          'export are left') in output
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 200
  assert metrics['num_examples'] == MNIST_SMALL_TEST_EXAMPLES
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1
  assert checkpoints.latest_step(str(model_dir)) == 200


# --- The TF2 engines ---------------------------------------------------------


@pytest.mark.slow
def test_tf2_a_worker_killed_while_training_fails_the_other_at_once(
    tmp_path, mnist_small_dir):
  """As the Estimator engine's (above): the cause in one line, no traceback,
  the checkpoints whole. (ctl: keras trains through the same guard,
  controller.engine_modes.)"""
  model_dir = tmp_path / 'model'
  command = _command(model_dir, mnist_small_dir, '--engine=ctl',
                     '--strategy=multi_worker_mirrored', '--train_steps=400',
                     '--save_checkpoints_steps=20', '--export=none',
                     '--cluster_timeout_secs=40')
  _kill_a_worker_while_training(command, model_dir, tmp_path)


@pytest.mark.slow
@pytest.mark.both_stacks
def test_tf2_a_parameter_server_killed_while_training_fails_the_chief_then_it_resumes(
    tmp_path, mnist_small_dir):
  """Under ParameterServerStrategy the chief's coordinator loses the killed
  ps: its one line (watchdog.PS_LOST), exit 1. The ps and the chief
  restarted (the worker serves on) resume from the latest checkpoint."""
  # The kill comes at the first checkpoint after step 0 (20): 140 steps
  # left (33 steps/s here, with the CPU shared) leave it a margin; the
  # chief evaluates only at the end (--throttle_secs).
  model_dir, steps = tmp_path / 'model', 160
  command = _command(model_dir, mnist_small_dir, '--engine=ctl',
                     '--strategy=parameter_server', f'--train_steps={steps}',
                     '--save_checkpoints_steps=20', '--throttle_secs=600',
                     '--export=none', '--cluster_timeout_secs=60')
  cluster = scripts_dir.load('local_cluster').make_cluster(True, 1, 1,
                                                           False)[0]
  logs = {task: tmp_path / f'{task}.log' for task in ('chief', 'worker', 'ps')}
  procs = {task: _start_task(command, log, cluster, 0, task)
           for task, log in logs.items()}
  _wait_until(procs['chief'], logs['chief'],
              lambda: checkpoints.latest_step(str(model_dir)) > 0,
              'checkpoint after step 0')
  procs['ps'].kill()
  procs['ps'].wait()
  assert procs['chief'].wait(timeout=120) == 1, logs['chief'].read_text()[
      -3000:]
  output = logs['chief'].read_text()
  assert 'Traceback' not in output
  assert output.strip().splitlines()[-1] == f'error: {PS_LOST}'
  latest = checkpoints.latest_step(str(model_dir))
  assert 0 < latest < steps

  restarted = {task: tmp_path / f'{task}2.log' for task in ('ps', 'chief')}
  procs.update({task: _start_task(command, log, cluster, 0, task)
                for task, log in restarted.items()})
  for task, proc in procs.items():
    log = restarted.get(task, logs[task])
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
  assert f'Restoring {model_dir}/ckpt-{latest}' in restarted[
      'chief'].read_text()
  assert checkpoints.latest_step(str(model_dir)) == steps
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'global_step'] == steps


@pytest.mark.slow
@pytest.mark.default_stack_only
def test_keras_ctrl_c_saves_the_step_and_the_rerun_resumes(
    tmp_path, mnist_small_dir, caplog):
  model_dir = tmp_path / 'model'
  # The Ctrl-C once the log shows a step past 0 (polled every 0.1 s; it
  # stopped at step 30 here, and 270 more steps take ~3 s); the checkpoint
  # of the step it came at must be the only one. No checkpoint before it: no
  # evaluation either (a TF2 engine evaluates its first checkpoint) before
  # the rerun's final one.
  command = _command(model_dir, mnist_small_dir, '--engine=keras',
                     '--train_steps=300', '--save_checkpoints_steps=100000',
                     '--log_step_count_steps=10', '--verbosity=1',
                     '--export=none')
  log = tmp_path / 'stopped.log'
  proc = _start(command, log)
  _wait_for_line(proc, log, r'loss = .*, step = [1-9]')
  output, seconds = _preempt(proc, log, signal.SIGINT)
  assert 'Traceback' not in output
  step = _stopped_step(output, signal.SIGINT)
  assert 10 <= step < 300
  assert checkpoints.latest_step(str(model_dir)) == step
  assert _check_checkpoints(model_dir) == [step]
  assert not (model_dir / 'metrics.json').exists()
  print(f'keras: Ctrl-C at step {step}: exit 130 after {seconds:.1f} s')

  rerun_log, _ = _rerun_to_the_end(command, model_dir, 300, caplog)
  assert f'Restoring {model_dir}/ckpt-{step}' in rerun_log


@pytest.mark.slow
@pytest.mark.parametrize('engine', ['ctl', 'keras'])
def test_tf2_engine_nan_loss_fails_and_keeps_finite_checkpoints(
    tmp_path, mnist_small_dir, engine, capfd):
  model_dir = tmp_path / 'model'
  # Diverges within a few steps; a checkpoint every step until then. In
  # this process, through run.main and its error reporting (a TensorFlow
  # import less): the real command's one-line error and exit code are
  # test_nan_loss_fails_with_the_step_and_keeps_the_last_good_checkpoint's.
  with mock.patch.dict(os.environ, _ENV, clear=True):
    returncode, stderr = cli_config.main_in_process(
        _command(model_dir, mnist_small_dir, f'--engine={engine}',
                 '--optimizer=sgd', '--lr_decay=none', '--learning_rate=1e6',
                 '--train_steps=30', '--save_checkpoints_steps=1'
                 )[len(_CLI):], capfd)
  assert returncode == 1, stderr[-3000:]
  assert 'Traceback' not in stderr
  line = stderr.strip().splitlines()[-1]
  assert re.match(r'error: (loss is NaN|weights are NaN or Inf) at step \d+: '
                  r'training diverged', line), line
  assert not (model_dir / 'metrics.json').exists()
  # The steps before the divergence were checkpointed, all finite.
  assert _check_checkpoints(model_dir)


@pytest.mark.slow
@pytest.mark.parametrize('engine, signum', [
    ('keras', signal.SIGTERM),
    pytest.param('ctl', signal.SIGINT, marks=pytest.mark.both_stacks)],
                         ids=['keras-sigterm', 'ctl-ctrl_c'])
def test_tf2_sigterm_to_one_worker_saves_one_step_for_the_whole_cluster(
    tmp_path, mnist_small_dir, engine, signum):
  """And a Ctrl-C, passed on as a SIGTERM: the interrupted worker exits
  130, the other, preempted, 0."""
  model_dir = tmp_path / 'model'
  # The workers agree on a step at the end of a run of --steps_per_loop
  # steps: short runs, so that the signalled one exits well within the grace
  # period on a slow, shared machine too. SIGTERM comes once the chief logs
  # a step past 0 (every 10 steps); both saved step 40 here, on a quiet
  # machine, and the 110 steps after it take ~5 s: a margin for the
  # agreement on a slower, loaded machine. No checkpoint before the one the
  # signal makes, so no evaluation (a TF2 engine evaluates its first
  # checkpoint) at all: the ctl case's rerun only trains (below).
  train_steps = 150
  command = _command(model_dir, mnist_small_dir, f'--engine={engine}',
                     '--strategy=multi_worker_mirrored',
                     f'--train_steps={train_steps}',
                     '--save_checkpoints_steps=100000', '--steps_per_loop=10',
                     '--log_step_count_steps=10', '--verbosity=1',
                     '--cluster_timeout_secs=120', '--export=none')
  logs = [tmp_path / 'worker0.log', tmp_path / 'worker1.log']
  procs = _start_cluster(command, logs)
  _wait_for_line(procs[0], logs[0], r'loss = .*, step = [1-9]')
  # To the worker that is not the chief: the chief must save too.
  output, seconds = _preempt(procs[1], logs[1], signum)
  assert procs[0].wait(timeout=60) == 0, logs[0].read_text()[-3000:]
  assert 'Traceback' not in output
  steps = {_stopped_step(output, signum),
           _stopped_step(logs[0].read_text())}
  assert len(steps) == 1, steps  # One step, saved by every worker.
  step = steps.pop()
  assert 10 <= step < train_steps
  assert checkpoints.latest_step(str(model_dir)) == step
  assert _check_checkpoints(model_dir) == [step]
  assert not (model_dir / 'metrics.json').exists()
  assert not list(model_dir.glob('tmp_*'))  # The worker's scratch, removed.
  print(f'{engine}: {signal.Signals(signum).name} to worker 1: both saved '
        f'step {step}; it exited {_STOPPED[signum][0]} after {seconds:.1f} s')

  # The cluster rerun once (ctl, on both stacks), not per engine: what it
  # checks beyond the engine's run alone is the TF2 job's (job.save under
  # the preemption handler, job.restore in a cluster: both engines'); keras
  # resumes by the same code alone and in a cluster (keras_fit._fit, a fit of
  # the steps left), as test_keras_ctrl_c_saves_the_step_and_the_rerun_resumes
  # checks. Two TensorFlow processes less. With --mode=train: the restore
  # and the steps left are train_and_evaluate's (controller.engine_modes,
  # _training_job, then the engine's run), and its evaluator (built in
  # every worker as it starts) and collective final evaluation, ~2 CPU-s
  # a worker, are not what the rerun checks (a cluster's final evaluation
  # and metrics.json are test_cluster_runs').
  if engine != 'ctl':
    return
  restarted = [tmp_path / 'worker0-rerun.log', tmp_path / 'worker1-rerun.log']
  for proc, log in zip(_start_cluster([*command, '--mode=train'], restarted),
                       restarted):
    assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    # A normal finish: no thread's traceback (on TensorFlow 2.21 worker 1's
    # PeerTerminationWatcher had printed 'Socket closed' in 2 of 3 runs).
    assert 'Traceback' not in log.read_text(), log.read_text()[-3000:]
  assert f'Restoring {model_dir}/ckpt-{step}' in restarted[0].read_text()
  assert checkpoints.latest_step(str(model_dir)) == train_steps


@pytest.mark.slow
def test_tf2_sigterm_at_a_cluster_chief_s_final_evaluation_stops_it(
    tmp_path, mnist_small_dir):
  """Under multi_worker_mirrored TensorFlow's handler holds SIGTERM while
  training and acts only between steps: at the end the chief takes it back
  and stops at once (issue 73). Its peer, in the collective evaluation,
  has lost it; the cluster restarted does what is left, one export."""
  model_dir = tmp_path / 'model'
  flags = _command(model_dir, mnist_small_dir, '--engine=ctl',
                   '--strategy=multi_worker_mirrored', '--train_steps=20',
                   '--save_checkpoints_steps=100000', '--steps_per_loop=10',
                   '--cluster_timeout_secs=120', '--export=final')[len(_CLI):]
  logs = [tmp_path / 'worker0.log', tmp_path / 'worker1.log']
  helper = pathlib.Path(__file__).with_name('signal_at_end.py')
  procs = _start_cluster([sys.executable, str(helper), *flags], logs)
  assert procs[0].wait(timeout=300) == 0, logs[0].read_text()[-3000:]
  assert _stopped_step(logs[0].read_text()) == 20
  assert procs[1].wait(timeout=300) != 0  # Its peer stopped mid-evaluation.
  assert checkpoints.latest_step(str(model_dir)) == 20
  assert not (model_dir / 'metrics.json').exists()
  assert not list(model_dir.glob('export/final/*/saved_model.pb'))

  reruns = [tmp_path / 'worker0-rerun.log', tmp_path / 'worker1-rerun.log']
  for proc, log in zip(_start_cluster([*_CLI, *flags], reruns), reruns):
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'global_step'] == 20
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1
