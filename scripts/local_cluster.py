#!/usr/bin/env python3
"""Starts a whole TF_CONFIG cluster of trainers on this machine.

    python scripts/local_cluster.py --workers=2 --evaluator -- \\
        --model_dir=/tmp/mwms --strategy=multi_worker_mirrored --train_steps=500
    python scripts/local_cluster.py --chief --workers=1 --ps=1 -- \\
        --model_dir=/tmp/ps --strategy=parameter_server --train_steps=500
    python scripts/local_cluster.py --chief --workers=2 --ps=1 --evaluator \\
        -- --model_dir=/tmp/ps2 --engine=ctl --strategy=parameter_server

Every task listens on a free loopback port and gets its own TF_CONFIG; all
run `python -m estimator_trainer.run` with the flags after `--`. Output lines
are prefixed with the task (`[worker:1] ...`). If a task fails, the others are
stopped and the launcher exits with that task's exit code.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time


def _ephemeral_ports():
  """The ports the kernel hands out for bind(port 0) and outgoing
  connections."""
  try:
    with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
      low, high = map(int, f.read().split())
  except OSError:  # Not Linux: Linux's default.
    low, high = 32768, 60999
  return range(low, high + 1)


def free_ports(count):
  """Distinct free loopback ports (held open together so they differ),
  outside the ephemeral range: nothing else on the machine is given one of
  them in the seconds before its task binds it (with port 0, an outgoing
  connection could be)."""
  ephemeral = _ephemeral_ports()
  candidates = [p for p in range(10000, 65536) if p not in ephemeral]
  rng = random.SystemRandom()
  sockets = []
  try:
    for _ in range(100 * count):
      s = socket.socket()
      try:
        s.bind(('127.0.0.1', rng.choice(candidates) if candidates else 0))
        sockets.append(s)
      except OSError:  # In use.
        s.close()
      if len(sockets) == count:
        return [s.getsockname()[1] for s in sockets]
    raise RuntimeError(f'no {count} free loopback ports')
  finally:
    for s in sockets:
      s.close()


def make_cluster(chief, workers, ps, evaluator):
  """{'cluster': ..., tasks: [(type, index)]} on free loopback ports."""
  # The evaluator is listed, as Kubeflow's TFJob does, so that the chief
  # knows to leave the final evaluation to it; the trainer keeps it out of
  # the training cluster that TensorFlow sees.
  counts = {'chief': int(chief), 'worker': workers, 'ps': ps,
            'evaluator': int(evaluator)}
  ports = iter(free_ports(sum(counts.values())))
  cluster = {job: [f'127.0.0.1:{next(ports)}' for _ in range(n)]
             for job, n in counts.items() if n}
  tasks = [(job, i) for job, n in counts.items() for i in range(n)]
  return cluster, tasks


def _pump(name, stream, lock):
  for line in stream:
    with lock:
      sys.stdout.write(f'[{name}] {line}')
      sys.stdout.flush()


class _Terminated(Exception):
  """The launcher got SIGTERM."""


def _raise_terminated(signum, frame):
  del signum, frame
  raise _Terminated()


def _signal_running(procs, signum):
  for proc in procs.values():
    if proc.poll() is None:
      try:
        os.killpg(proc.pid, signum)
      except ProcessLookupError:
        pass  # It ended since.


def run_cluster(cluster, tasks, trainer_args, python=sys.executable,
                list_evaluator=True, popen=subprocess.Popen):
  """Runs every task to completion; returns the launcher's exit code. Ctrl-C
  or SIGTERM (a scheduler stopping the launcher) is passed on to every task:
  each saves its step and stops (as interrupted or preempted), none is left
  running; a second Ctrl-C is passed on too, which stops them at once.
  Without `list_evaluator`, no task's TF_CONFIG lists the evaluator (the
  evaluator's own gives it only its task), as TensorFlow's
  train_and_evaluate documentation writes it. `popen` starts each task, as
  subprocess.Popen does (the tests start them warm)."""
  previous_handler = signal.signal(signal.SIGTERM, _raise_terminated)
  # Ctrl-C's KeyboardInterrupt even where SIGINT came ignored (a job a
  # non-interactive shell started with &: Python then keeps it ignored).
  previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
  lock = threading.Lock()
  procs, pumps = {}, []
  code = 0
  stop = signal.SIGTERM  # What the tasks still running get at the end.
  if not list_evaluator:
    cluster = {job: addresses for job, addresses in cluster.items()
               if job != 'evaluator'}
  try:
    for task_type, index in tasks:
      env = dict(os.environ, TF_CONFIG=json.dumps(
          {'cluster': cluster, 'task': {'type': task_type, 'index': index}}))
      proc = popen(
          [python, '-m', 'estimator_trainer.run', *trainer_args], env=env,
          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
          start_new_session=True)
      name = f'{task_type}:{index}'
      procs[name] = proc
      pump = threading.Thread(target=_pump, args=(name, proc.stdout, lock))
      pump.start()
      pumps.append(pump)
    while any(p.poll() is None for p in procs.values()):
      failed = [(n, p.returncode) for n, p in procs.items()
                if p.returncode not in (None, 0)]
      if failed:
        name, code = failed[0]
        print(f'[launcher] {name} exited with {code}: stopping the others',
              flush=True)
        break
      time.sleep(0.2)
  except KeyboardInterrupt:
    code = 128 + signal.SIGINT  # 130, as a shell reports a Ctrl-C.
    stop = signal.SIGINT
  except _Terminated:
    code = 128 + signal.SIGTERM  # As a shell reports a SIGTERM exit.
  finally:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # Stopping already.
    signal.signal(signal.SIGINT, lambda signum, frame: _signal_running(
        procs, signal.SIGINT))
    _signal_running(procs, stop)
    # Saving can take a TF2 multi-worker cluster beyond 10 s (the workers
    # agree on a step first): a user who will not wait presses Ctrl-C
    # again; a scheduler's grace period (Kubernetes: 30 s) must see the
    # launcher stop its tasks before it kills the launcher.
    deadline = time.monotonic() + (120 if stop == signal.SIGINT else 10)
    for proc in procs.values():
      try:
        proc.wait(max(0.1, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for pump in pumps:
      pump.join()
    signal.signal(signal.SIGTERM, previous_handler)
    signal.signal(signal.SIGINT, previous_sigint)
  if code == 0:
    code = next((p.returncode for p in procs.values() if p.returncode), 0)
  summary = ', '.join(f'{n}={p.returncode}' for n, p in procs.items())
  print(f'[launcher] exit codes: {summary}', flush=True)
  return code


def main(argv=None, popen=subprocess.Popen):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n')[0],
      usage='%(prog)s [options] -- TRAINER_FLAGS...')
  parser.add_argument('--workers', type=int, default=2)
  parser.add_argument('--chief', action='store_true',
                      help='add a chief task (parameter_server needs one)')
  parser.add_argument('--ps', type=int, default=0, help='parameter servers')
  parser.add_argument('--evaluator', action='store_true',
                      help='add an evaluator task')
  parser.add_argument('--unlisted_evaluator', action='store_true',
                      help='add an evaluator task that no TF_CONFIG lists '
                      '(TensorFlow\'s train_and_evaluate documentation\'s '
                      'form)')
  parser.add_argument('trainer_args', nargs='*',
                      help='flags for estimator_trainer.run, after --')
  args = parser.parse_args(argv)
  if args.workers < 0 or args.ps < 0 or not (args.workers or args.chief):
    parser.error('the cluster needs a chief or at least one worker')
  cluster, tasks = make_cluster(args.chief, args.workers, args.ps,
                                args.evaluator or args.unlisted_evaluator)
  print(f'[launcher] cluster {json.dumps(cluster)}', flush=True)
  return run_cluster(cluster, tasks, args.trainer_args,
                     list_evaluator=not args.unlisted_evaluator, popen=popen)


if __name__ == '__main__':
  sys.exit(main())
