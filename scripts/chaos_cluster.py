#!/usr/bin/env python3
"""Chaos on a structured-data cluster: random SIGKILLs, restarts as a
supervisor's OnFailure does them, then the checks of a run that survived.

    python scripts/chaos_cluster.py --work_dir=/tmp/chaos --engine=estimator \\
        --strategy=parameter_server --seed=1

Writes census-like TFRecords (an extra `user_id` hashed into 1,000,000
embedding rows, which the 2 parameter servers split), then runs a cluster on
loopback: chief, 2 workers and 2 ps with --strategy=parameter_server, chief
and 1 worker with multi_worker_mirrored; with --evaluator, an evaluator task
too. Every task that exits non-zero is started again with the same
TF_CONFIG; one that exits 0 is done. Seeded kills: --kills SIGKILLs of a
random task in training, each 0-5 s after one of the 5 checkpoints before
the last (a checkpoint every --train_steps / 6), and one of a chief, worker
or evaluator 0-1.5 s after the last appears. Then checks: every task's last
exit 0, the latest checkpoint, metrics.json and the final export at
--train_steps exactly, the step counter the latest checkpoint holds equal to
the step in its name, no checkpoint step going back, and the final
export's answers on the test set equal to metrics.json. Prints a JSON
summary line (kills, restarts, final step, served vs metrics); exit 1 if a
check failed. Each incarnation's output stays in WORK_DIR/logs.
"""

import argparse
import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

import local_cluster
from checkpoint_steps import latest_step, saved_step

# The tasks killed as the last checkpoint appears: those that finish the
# run (an evaluator evaluates and exports it).
AT_END = ('chief', 'worker', 'evaluator')
MAX_RESTARTS = 20  # Past this a task restarts in a loop: a failure.


def write_data(data_dir, rows):
  """Census-like TFRecords whose user_id hashes into 1M embedding rows."""
  from estimator_trainer.benchmark import census  # pylint: disable=g-import-not-at-top
  census.write(data_dir, rows, 2, 0, 0.0, False)
  path = os.path.join(data_dir, 'feature_spec.json')
  with open(path) as f:
    spec = json.load(f)
  spec['columns']['user_id'] = {'kind': 'string_hashed',
                                'num_bins': 1_000_000, 'embedding_dim': 4}
  with open(path, 'w') as f:
    json.dump(spec, f)
  return spec


class Supervisor:
  """Starts each task, restarts it when it exits non-zero (OnFailure)."""

  def __init__(self, cluster, tasks, flags, log_dir):
    self.cluster, self.flags, self.log_dir = cluster, flags, log_dir
    self.procs, self.starts, self.exits = {}, {}, {}
    for task in tasks:
      self.starts[task] = 0
      self.exits[task] = []
      self._start(task)

  def _start(self, task):
    task_type, index = task
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {'cluster': self.cluster, 'task': {'type': task_type,
                                           'index': index}}))
    self.starts[task] += 1
    log = open(os.path.join(self.log_dir, f'{task_type}-{index}.'
                            f'{self.starts[task]}.log'), 'w')
    with log:
      self.procs[task] = subprocess.Popen(
          [sys.executable, '-m', 'estimator_trainer.run', *self.flags],
          env=env, stdout=log, stderr=subprocess.STDOUT,
          start_new_session=True)

  def log_of(self, task):
    task_type, index = task
    return os.path.join(self.log_dir,
                        f'{task_type}-{index}.{self.starts[task]}.log')

  def poll(self):
    """Restarts the tasks that exited non-zero; True when all exited 0."""
    for task, proc in self.procs.items():
      # The exit of its current incarnation, once (running() and kill()
      # reap too).
      if len(self.exits[task]) < self.starts[task] and (
          proc.poll() is not None):
        self.exits[task].append(proc.returncode)
        if proc.returncode != 0:
          print(f'[chaos] {task[0]}:{task[1]} exited {proc.returncode} '
                f'({self.log_of(task)}): restarting', flush=True)
          if self.starts[task] > MAX_RESTARTS:
            raise RuntimeError(f'{task[0]}:{task[1]} restarted '
                               f'{MAX_RESTARTS} times')
          time.sleep(1)
          self._start(task)
    return all(p.returncode == 0 for p in self.procs.values())

  def running(self):
    return [task for task, proc in self.procs.items()
            if proc.poll() is None]

  def kill(self, task):
    """SIGKILLs the task; whether that ended it (not an exit just before)."""
    try:
      os.killpg(self.procs[task].pid, signal.SIGKILL)
    except ProcessLookupError:
      pass  # Ended since.
    return self.procs[task].wait() == -signal.SIGKILL

  def stop_all(self):
    for task, proc in self.procs.items():
      if proc.poll() is None:
        self.kill(task)
        proc.wait()


def served(export_dir, data_dir, spec):
  """accuracy, average_loss and prediction/mean of an export's answers on
  the test TFRecords."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      sorted(glob.glob(os.path.join(data_dir, 'test-*.tfrecord'))))]
  positive = spec['label_vocabulary'][1].encode()
  labels = np.array([tf.train.Example.FromString(r).features.feature[
      spec['label']].bytes_list.value[0] == positive for r in records])
  predict = tf.saved_model.load(export_dir).signatures['predict']
  p = predict(examples=tf.constant(records))['logistic'].numpy()[:, 0]
  p64 = p.astype(np.float64)
  loss = -np.mean(labels * np.log(p64) + (1 - labels) * np.log(1 - p64))
  return {'accuracy': float(np.mean((p > 0.5) == labels)),
          'average_loss': float(loss), 'prediction/mean': float(np.mean(p))}


def _close(a, b, rel):
  return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def run(args):
  data_dir = os.path.join(args.work_dir, 'data')
  model_dir = os.path.join(args.work_dir, 'model')
  log_dir = os.path.join(args.work_dir, 'logs')
  os.makedirs(log_dir)
  spec = write_data(data_dir, args.rows)
  ps = args.strategy == 'parameter_server'
  cluster, tasks = local_cluster.make_cluster(True, 2 if ps else 1,
                                              2 if ps else 0, args.evaluator)
  flags = [
      f'--model_dir={model_dir}', f'--engine={args.engine}',
      f'--strategy={args.strategy}',
      f'--feature_spec={data_dir}/feature_spec.json',
      f'--train_files={data_dir}/train-*.tfrecord',
      f'--eval_files={data_dir}/test-*.tfrecord', '--model=dnn',
      '--model_kwargs={"hidden_units": [16]}', '--optimizer=adagrad',
      '--global_batch_size=64', f'--train_steps={args.train_steps}',
      f'--save_checkpoints_steps={args.train_steps // 6}',
      f'--steps_per_loop={args.train_steps // 6}', '--export=final',
      f'--cluster_timeout_secs={args.cluster_timeout_secs}']
  rng = random.Random(args.seed)
  # A kill in training after each of --kills of the 5 checkpoints before
  # the last (a random delay later): however fast training is.
  every = args.train_steps // 6
  kill_steps = sorted(every * n for n in rng.sample(range(1, 6),
                                                     args.kills))
  kills, steps_seen, went_back = [], [], []
  supervisor = Supervisor(cluster, tasks, flags, log_dir)
  start = time.monotonic()
  try:
    while not supervisor.poll():
      if time.monotonic() - start > args.timeout_secs:
        raise RuntimeError(f'not finished in {args.timeout_secs} s')
      step = latest_step(model_dir)
      if steps_seen and step < max(steps_seen):
        went_back.append((max(steps_seen), step))
      if not steps_seen or step != steps_seen[-1]:
        steps_seen.append(step)
      at_end = step >= args.train_steps and not any(
          kill['at_end'] for kill in kills)
      in_training = bool(kill_steps) and step >= kill_steps[0]
      if at_end or in_training:
        if in_training:
          kill_steps.pop(0)
        time.sleep(rng.uniform(0, 1.5) if at_end else rng.uniform(0, 5))
        candidates = [t for t in supervisor.running()
                      if not at_end or t[0] in AT_END]
        if candidates:
          victim = rng.choice(candidates)
          hit = supervisor.kill(victim)
          kills.append({'task': f'{victim[0]}:{victim[1]}', 'step': step,
                        'at_end': at_end, 'hit': hit,
                        'second': round(time.monotonic() - start)})
          print(f'[chaos] SIGKILL {victim[0]}:{victim[1]} at checkpoint '
                f'{step}{"" if hit else " (it had exited)"}', flush=True)
      time.sleep(0.2)
  finally:
    supervisor.stop_all()
  summary = {
      'engine': args.engine, 'strategy': args.strategy, 'seed': args.seed,
      'evaluator': args.evaluator,
      'seconds': round(time.monotonic() - start),
      'kills': kills, 'restarts': {
          f'{t}:{i}': n - 1 for (t, i), n in supervisor.starts.items()},
      'last_exits': {f'{t}:{i}': e[-1] for (t, i), e in
                     supervisor.exits.items()},
      'checkpoints_seen': steps_seen, 'went_back': went_back}
  summary['final_step'] = latest_step(model_dir)
  summary['saved_step'] = saved_step(model_dir, args.engine)
  failures = [name for name, ok in (
      ('a task exited non-zero', set(summary['last_exits'].values()) == {0}),
      ('final step', summary['final_step'] == args.train_steps),
      ('a checkpoint went back', not went_back),
      ('saved step != its name', summary['saved_step'] ==
       summary['final_step'])) if not ok]
  path = os.path.join(model_dir, 'metrics.json')
  if os.path.exists(path):
    with open(path) as f:
      metrics = json.load(f)
    export_dir, = glob.glob(os.path.join(model_dir, 'export', 'final', '*'))
    answers = served(export_dir, data_dir, spec)
    summary.update(metrics_step=metrics['global_step'], served=answers,
                   metrics={k: metrics[k] for k in answers})
    with open(os.path.join(export_dir, 'assets.extra',
                           'evaluation.json')) as f:
      summary['export_step'] = json.load(f)['global_step']
    if {metrics['global_step'], summary['export_step']} != {
        summary['final_step']}:
      failures.append('metrics.json or the export of another step')
    if not (_close(answers['accuracy'], metrics['accuracy'], 1e-6) and
            _close(answers['average_loss'], metrics['average_loss'], 1e-4)
            and _close(answers['prediction/mean'],
                       metrics['prediction/mean'], 1e-5)):
      failures.append('served != metrics.json')
  else:
    failures.append('no metrics.json')
  summary['failures'] = failures
  print(json.dumps(summary), flush=True)
  return 1 if failures else 0


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--work_dir', required=True,
                      help='a new directory: data, model_dir, task logs')
  parser.add_argument('--engine', default='estimator',
                      choices=('estimator', 'ctl', 'keras'))
  parser.add_argument('--strategy', default='parameter_server',
                      choices=('parameter_server', 'multi_worker_mirrored'))
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--kills', type=int, default=3, choices=range(6),
                      help='SIGKILLs during training, each 0-5 s after one '
                      'of the checkpoints before the last (one more at the '
                      'end)')
  parser.add_argument('--train_steps', type=int, default=3000)
  parser.add_argument('--evaluator', action='store_true',
                      help='an evaluator task too (listed in TF_CONFIG), '
                      'killed as the others are')
  parser.add_argument('--rows', type=int, default=4000)
  parser.add_argument('--cluster_timeout_secs', type=int, default=60)
  parser.add_argument('--timeout_secs', type=int, default=1200)
  args = parser.parse_args(argv)
  if os.path.exists(args.work_dir):
    parser.error(f'--work_dir {args.work_dir} exists: give a new one')
  # SIGTERM ends the supervisor through run()'s finally: no task is left.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
  try:
    return run(args)
  except (RuntimeError, OSError) as e:
    print(f'error: {e} (task logs in {args.work_dir}/logs)', flush=True)
    return 1


if __name__ == '__main__':
  sys.exit(main())
