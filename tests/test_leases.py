"""Leases (lease.py): evaluator.json says an evaluator runs for as long as
it does. A killed evaluator's file (issue 73, item 3) had the chief leave
the final evaluation to an evaluator that was gone."""

import json
import logging
import os
import re
import signal
import subprocess
import time

import pytest

from estimator_trainer import layout
from estimator_trainer import lease
import lease_holder


def _evaluator_announced(model_dir):
  return lease.live(layout.evaluator_file(str(model_dir)),
                    'an evaluator task') is not None


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records
          if r.levelno == logging.WARNING]


def test_a_live_evaluator_is_announced_and_a_killed_one_is_not(tmp_path,
                                                               caplog):
  """Killed alone, the evaluator's heartbeat process removes its file;
  killed with it (a container's end), the file stays, and is stale: its pid
  is gone from this host. Either way the chief evaluates."""
  path = layout.evaluator_file(str(tmp_path))
  for kill_group in (False, True):
    holder = lease_holder.start('evaluator', tmp_path,
                                start_new_session=True)
    assert _evaluator_announced(tmp_path)
    if kill_group:
      os.killpg(holder.pid, signal.SIGKILL)
    else:
      holder.kill()
    holder.wait()
    if not kill_group:
      _wait_until(lambda: not os.path.exists(path))
  assert os.path.exists(path)  # Left with its heartbeat process.
  caplog.clear()
  with caplog.at_level(logging.INFO):
    assert not _evaluator_announced(tmp_path)
  record = lease.read(path)
  warning, = _warnings(caplog)
  assert re.fullmatch(
      rf'Ignored {re.escape(path)} of an evaluator task \(host '
      rf'{record["host"]}, pid {holder.pid}, since {record["since"]}\), its '
      rf'heartbeat \d+ s old: pid {holder.pid} is gone from this host',
      warning), warning


def test_a_holder_stopped_by_ctrl_c_leaves_no_lease(tmp_path):
  """A terminal's Ctrl-C reaches the whole process group: the heartbeat
  process ignores it, from its start on, and removes the file when the
  holder has unwound. Sent as the holder had just started its heartbeat
  process, it killed that process before it ignored the signal, and the
  file stayed."""
  holder = lease_holder.start('evaluator', tmp_path, start_new_session=True,
                              stderr=subprocess.DEVNULL)
  os.killpg(holder.pid, signal.SIGINT)
  # Stopped by the signal, not at the end of its 600 s.
  assert holder.wait(timeout=60) == -signal.SIGINT
  _wait_until(lambda: not os.path.exists(
      layout.evaluator_file(str(tmp_path))))


def test_an_evaluator_file_with_an_old_heartbeat_is_ignored(tmp_path,
                                                            caplog):
  """Another host's evaluator, silent for longer than a lease; and the
  file a version before leases wrote (no heartbeat)."""
  path = layout.evaluator_file(str(tmp_path))
  record = {'host': 'elsewhere', 'pid': 1, 'since': '2026-12-06 10:00:00 UTC',
            'command': 'trainer', 'heartbeat': time.time() - 75}
  (tmp_path / layout.EVALUATOR_FILE).write_text(json.dumps(record))
  with caplog.at_level(logging.INFO):
    assert not _evaluator_announced(tmp_path)
  assert _warnings(caplog) == [
      f'Ignored {path} of an evaluator task (host elsewhere, pid 1, since '
      '2026-12-06 10:00:00 UTC), its heartbeat 75 s old: older than a lease '
      '(60 s)']
  # Within its lease, another host's evaluator is taken as running.
  record['heartbeat'] = time.time() - 30
  (tmp_path / layout.EVALUATOR_FILE).write_text(json.dumps(record))
  assert _evaluator_announced(tmp_path)
  (tmp_path / layout.EVALUATOR_FILE).write_text(
      json.dumps({'host': 'elsewhere', 'pid': 1}))
  assert not _evaluator_announced(tmp_path)


@pytest.mark.estimator
def test_the_chief_leaves_the_end_only_to_a_live_evaluator(tmp_path, caplog):
  """The estimator engine's chief, at the end of training, asks
  evaluator_announced whether to leave the final evaluation and export to
  an evaluator TF_CONFIG does not list."""
  from estimator_trainer.estimator import cluster_roles  # pylint: disable=g-import-not-at-top
  holder = lease_holder.start('evaluator', tmp_path, start_new_session=True)
  try:
    assert cluster_roles.evaluator_announced(str(tmp_path))
  finally:
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
  with caplog.at_level(logging.INFO):
    assert not cluster_roles.evaluator_announced(str(tmp_path))
  assert 'is gone from this host' in caplog.text


def test_a_holder_renews_its_heartbeat_and_another_holder_is_left_alone(
    tmp_path, monkeypatch, capfd):
  """The heartbeat process rewrites the record's heartbeat; once the file
  names another holder (one that took the lease over) it stops, saying so,
  and the release leaves that holder's file."""
  monkeypatch.setattr(lease, 'HEARTBEAT_SECS', 0.05)
  path = str(tmp_path / 'lease.json')
  record = lease.new_record()
  with open(path, 'w') as f:
    f.write(lease.dumps({**record, 'heartbeat': 0}))
  stderr = []
  with lease.hold(path, record):
    _wait_until(lambda: lease.read(path)['heartbeat'] > 0)
    other = {**record, 'pid': record['pid'] + 1}
    with open(path, 'w') as f:
      f.write(lease.dumps(other))
    _wait_until(lambda: stderr.append(capfd.readouterr().err) or
                'no longer renews it' in ''.join(stderr))
  assert lease.read(path) == other
  assert ''.join(stderr) == (
      f'warning: {path} names another holder (host {other["host"]}, pid '
      f'{other["pid"]}): this process no longer renews it\n')


def _wait_until(condition, timeout=30):
  """Polls `condition` (a bound for a hang, not a schedule)."""
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.02)
