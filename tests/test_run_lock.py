"""One model_dir, one training run (run_lock.py, issue 73 item 4): a second
training run on a model_dir in use is refused in one line (exit 2); a lock
whose holder is gone, or a task of the same cluster, is taken over."""

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import types

import pytest

from estimator_trainer import checkpoints
from estimator_trainer import cluster as cluster_lib
from estimator_trainer import engines
from estimator_trainer import layout
from estimator_trainer import lease
from estimator_trainer import outputs
from estimator_trainer import run_lock
from estimator_trainer.errors import ModelDirInUse
import cli_config
import engine_params
import lease_holder
import warm_process

_JOBS = {'chief': ['h0:2222'], 'worker': ['h1:2222'], 'ps': ['h2:2222']}


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records
          if r.levelno == logging.WARNING]


def _write_lock(model_dir, **fields):
  """A lock record of another host's run, renewed `age` s ago."""
  age = fields.pop('age', 0)
  record = {'host': 'elsewhere', 'pid': 7, 'since': '2026-12-06 10:00:00 UTC',
            'command': 'python -m estimator_trainer.run --model_dir=M',
            'heartbeat': time.time() - age, 'cluster': None, **fields}
  model_dir.mkdir(exist_ok=True)
  (model_dir / layout.LOCK_FILE).write_text(json.dumps(record))
  return record


def test_a_live_holder_refuses_a_second_run_in_one_line(tmp_path):
  holder = lease_holder.start('lock', tmp_path)
  try:
    record = lease.read(layout.lock_file(str(tmp_path)))
    with pytest.raises(ModelDirInUse) as refused:
      with run_lock.held(str(tmp_path), None):
        pytest.fail('a second holder')
    assert record['pid'] == holder.pid
    assert str(refused.value) == (
        f'{tmp_path} is in use by another training run (host '
        f'{socket.gethostname()}, pid {holder.pid}, since {record["since"]}: '
        f'{record["command"]}); let it finish or stop it, or give another '
        f'--model_dir ({tmp_path}/lock.json is taken over once its holder '
        'is gone: at once on its host, elsewhere 60 s after its last '
        'heartbeat)')
    assert lease.read(layout.lock_file(str(tmp_path))) == record
  finally:
    holder.kill()
    holder.wait()


@pytest.mark.parametrize('how', ['old heartbeat', 'killed with its beater'])
def test_a_stale_lock_is_taken_over_in_one_line(tmp_path, caplog, how):
  """Another host's lock unrenewed for longer than a lease; a holder of
  this host killed with its heartbeat process (a container's end)."""
  path = layout.lock_file(str(tmp_path))
  if how == 'old heartbeat':
    stale = _write_lock(tmp_path, age=61)
    why = r'its heartbeat 6\d s old: older than a lease \(60 s\)'
  else:
    holder = lease_holder.start('lock', tmp_path, start_new_session=True)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    stale = lease.read(path)
    why = rf'its heartbeat \d+ s old: pid {holder.pid} is gone from this host'
  with caplog.at_level(logging.INFO):
    with run_lock.held(str(tmp_path), None):
      assert lease.read(path)['pid'] == os.getpid()
  warning, = _warnings(caplog)
  assert re.fullmatch(
      rf'Took over {re.escape(path)} from {re.escape(lease.describe(stale))}'
      rf', {why}', warning), warning
  assert not os.path.exists(path)


def test_a_task_of_the_same_cluster_takes_the_lock_over(tmp_path, caplog):
  """A chief restarted (by a supervisor, elsewhere) while its former
  incarnation's lease lasts is no second run; another cluster's chief is."""
  chief = cluster_lib.Cluster(_JOBS, 'chief', 0, has_evaluator=False)
  _write_lock(tmp_path, cluster={**_JOBS, 'worker': ['h9:2222']})
  with pytest.raises(ModelDirInUse):
    with run_lock.held(str(tmp_path), chief):
      pass
  _write_lock(tmp_path, cluster=_JOBS)
  with caplog.at_level(logging.INFO):
    with run_lock.held(str(tmp_path), chief):
      assert lease.read(layout.lock_file(str(tmp_path)))['cluster'] == _JOBS
  assert _warnings(caplog)[0].endswith(': a task of this cluster')


def test_a_lock_another_run_took_over_meanwhile_is_left_to_it(tmp_path):
  """Two runs found the same stale lock; one took it over first. The
  other's takeover, which judged the stale record, must leave the new lock
  in place and not take it (it then finds it live: refused)."""
  path = layout.lock_file(str(tmp_path))
  stale = _write_lock(tmp_path, age=61)
  first = _write_lock(tmp_path, host='first')
  assert not run_lock._take_over(path, stale, lease.new_record(cluster=None))  # pylint: disable=protected-access
  assert lease.read(path) == first
  assert os.listdir(tmp_path) == [layout.LOCK_FILE]


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM,
                                    signal.SIGKILL])
def test_a_holder_stopped_by_a_signal_leaves_no_lock(tmp_path, caplog,
                                                     signum):
  """Ctrl-C, which a terminal sends to the whole process group (the
  heartbeat process ignores it), unwinds the holder, which releases the
  lock; a SIGTERM that kills the holder (exit 143: outside training's
  handler) or a SIGKILL leaves the removal to its heartbeat process. The
  next run takes the lock without a word."""
  holder = lease_holder.start('lock', tmp_path, stderr=subprocess.DEVNULL,
                              start_new_session=True)
  if signum == signal.SIGINT:
    os.killpg(holder.pid, signum)
  else:
    holder.send_signal(signum)
  # Stopped by the signal (SIGTERM: exit 143), not at the end of its 600 s.
  assert holder.wait(timeout=60) in (-signum, 128 + signum)
  _wait_until(lambda: not os.path.exists(layout.lock_file(str(tmp_path))))
  with caplog.at_level(logging.INFO):
    with run_lock.held(str(tmp_path), None):
      pass
  assert not _warnings(caplog)


@pytest.mark.parametrize('mode', engines.MODES)
def test_training_runs_and_their_chiefs_alone_take_the_lock(tmp_path, mode):
  """Evaluate, predict and export only read; in a cluster the chief holds
  the lock for its peers, which do not ask."""
  trains = mode in ('train_and_evaluate', 'train')
  tasks = {('chief', 0): trains, ('worker', 0): False, ('ps', 0): False}
  for task, expected in [(None, trains), *tasks.items()]:
    cluster = task and cluster_lib.Cluster(_JOBS, *task, has_evaluator=False)
    _write_lock(tmp_path)
    config = types.SimpleNamespace(model_dir=str(tmp_path), mode=mode,
                                   cluster=cluster)
    try:
      with engines._locked(config):  # pylint: disable=protected-access
        pass
      refused = False
    except ModelDirInUse:
      refused = True
    assert refused == expected, (mode, task)


def test_a_refused_run_removes_nothing_of_a_model_dir_it_did_not_make(
    tmp_path):
  """Two runs started at once on a new model_dir: both see none, one makes
  it with its lock; the other, refused, must not remove it as a failed run
  of its own (outputs.none_of_a_failed_run)."""
  model_dir = tmp_path / 'model'
  with pytest.raises(ModelDirInUse):
    with outputs.none_of_a_failed_run(str(model_dir)):
      _write_lock(model_dir)  # The other run's, made meanwhile.
      with run_lock.held(str(model_dir), None):
        pass
  assert (model_dir / layout.LOCK_FILE).exists()


def _wait_until(condition, timeout=60):
  """Polls `condition` (a bound for a hang, not a schedule)."""
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.05)


@pytest.mark.slow  # 15 CPU-s (ctl), 9 (estimator): a real run and its rerun.
@pytest.mark.serial
@pytest.mark.parametrize('engine', [engine_params.param('ctl', both_stacks=True),
                                    engine_params.param('estimator')])
def test_two_runs_on_one_model_dir(tmp_path, mnist_small_dir, capfd, caplog,
                                   engine):
  """The same command twice: the second, started while the first runs, is
  refused in one line naming it (exit 2), before it loads TensorFlow; the
  first goes on. Stopped by Ctrl-C (exit 130), it leaves no lock: the command
  run again is not refused, resumes from the first's step and finishes."""
  model_dir = tmp_path / 'model'
  argv = [f'--model_dir={model_dir}', '--dataset=mnist',
          f'--idx_dir={mnist_small_dir}', f'--engine={engine}',
          '--train_steps=300', '--save_checkpoints_steps=100000',
          '--log_step_count_steps=10', '--verbosity=1', '--export=none']
  log = tmp_path / 'first.log'
  with open(log, 'w') as f:
    first = warm_process.popen(
        [sys.executable, '-m', 'estimator_trainer.run', *argv], stdout=f,
        stderr=subprocess.STDOUT)
  try:
    _wait_until(lambda: re.search(r'loss = .*, step = [1-9]',
                                  log.read_text()) or first.poll() is not None)
    assert first.poll() is None, log.read_text()[-3000:]
    code, stderr = cli_config.main_in_process(argv, capfd)
    assert code == 2
    assert re.fullmatch(
        rf'error: {re.escape(str(model_dir))} is in use by another training '
        rf'run \(host {re.escape(socket.gethostname())}, pid {first.pid}, '
        r'since [-\d]+ [:\d]+ UTC: \S*python\S* -m estimator_trainer.run '
        rf'{re.escape(" ".join(argv))}\); let it finish or stop it, .*\)\n',
        stderr), stderr
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 130, log.read_text()[-3000:]
  finally:
    if first.poll() is None:
      first.kill()
      first.wait()
  output = log.read_text()
  step = int(re.search(r'Interrupted at step (\d+)', output).group(1))
  assert 'Traceback' not in output and 0 < step < 300
  assert not (model_dir / layout.LOCK_FILE).exists()
  with caplog.at_level(logging.INFO):
    cli_config.run_in_process(argv)
  assert 'Took over' not in caplog.text
  assert checkpoints.latest_step(str(model_dir)) == 300
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 300
  assert not (model_dir / layout.LOCK_FILE).exists()


def test_a_url_model_dirs_lock_best_effort(tmp_path, monkeypatch, caplog):
  """A model_dir by URL (gs://...; file:// here, through the same
  tf.io.gfile calls): no atomic create, a thread's heartbeat. A live lock
  refuses, a stale one is taken over; the holder renews it, and removes
  it at the end."""
  monkeypatch.setattr(lease, 'HEARTBEAT_SECS', 0.05)
  url = f'file://{tmp_path}'
  path = layout.lock_file(url)
  _write_lock(tmp_path)
  with pytest.raises(ModelDirInUse):
    with run_lock.held(url, None):
      pass
  stale = _write_lock(tmp_path, age=61)
  with caplog.at_level(logging.INFO):
    with run_lock.held(url, None):
      first = lease.read(path)
      assert first['pid'] == os.getpid()
      _wait_until(lambda: lease.read(path)['heartbeat'] > first['heartbeat'])
  assert _warnings(caplog)[0].startswith(
      f'Took over {path} from {lease.describe(stale)}')
  assert not os.listdir(tmp_path)
