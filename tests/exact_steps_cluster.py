"""Run as a process by test_tf2_exact_steps.py: a parameter-server cluster in
this process (a worker and a ps as in-process servers, this process the
coordinator) on which each TF2 engine's scheduled function runs again as a
ClusterCoordinator reruns a closure whose worker failed. Prints one JSON
line of what it measured, by engine.

A process of its own: connecting to a cluster changes the process's eager
context for good.
"""

import json
import socket
import types

import tensorflow as tf

from estimator_trainer import heads
from estimator_trainer import models
from estimator_trainer.tf2 import ctl
from estimator_trainer.tf2 import ema
from estimator_trainer.tf2 import exact_steps
from estimator_trainer.tf2 import keras_fit

BATCH = 4


def _port():
  with socket.socket() as probe:
    probe.bind(('localhost', 0))
    return probe.getsockname()[1]


def _strategy():
  spec = tf.train.ClusterSpec({'worker': [f'localhost:{_port()}'],
                               'ps': [f'localhost:{_port()}']})
  for job in ('worker', 'ps'):
    tf.distribute.Server(spec, job_name=job, task_index=0, protocol='grpc',
                         start=True)
  return tf.distribute.ParameterServerStrategy(
      tf.distribute.cluster_resolver.SimpleClusterResolver(
          spec, rpc_layer='grpc'))


class _Job:
  """What the engines' steps read of a Job: a model of one feature, with
  --clip_global_norm and --ema_decay (updates the guard must skip too)."""

  def __init__(self, strategy, coordinator):
    self.strategy, self.coordinator = strategy, coordinator
    self.config = types.SimpleNamespace(
        accumulate_steps=1, clip_global_norm=1.0, steps_per_loop=5)
    self.head = heads.make('binary')
    self.feature_keys = models.FeatureKeys()
    self.global_batch_size = BATCH
    with strategy.scope():
      inputs = {'x': tf.keras.Input((2,), name='x')}
      self.model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(
          inputs['x']))
      self.optimizer = tf.keras.optimizers.Adam(0.1)
      self.optimizer.build(self.model.trainable_variables)
      self.ema = ema.Average(self.model, 0.5)
    self.optimizer_parts = [(self.optimizer, self.model.trainable_variables)]
    self.skipped_steps = None
    self.claims = exact_steps.Claims(strategy)

  @property
  def step(self):
    return int(self.optimizer.iterations.numpy())

  def state(self):
    return {'step': self.step,
            'weights': [w.numpy().tolist() for w in self.model.weights],
            'averages': [w.numpy().tolist()
                         for w in self.ema.averages]}

  def dataset(self, _=None):
    return tf.data.Dataset.from_tensors(
        ({'x': [[1.0, 2.0]] * BATCH}, tf.ones([BATCH], tf.int64))).repeat()


def _ctl(strategy, coordinator):
  job = _Job(strategy, coordinator)
  trainer = ctl._Trainer(job)  # pylint: disable=protected-access
  iterator = iter(coordinator.create_per_worker_dataset(
      strategy.distribute_datasets_from_function(job.dataset)))

  def closure(num_steps):
    """The steps a closure of `num_steps` steps applied."""
    before = job.step
    coordinator.schedule(trainer.train_steps, args=(
        iterator, tf.constant(num_steps)))
    coordinator.join()
    return job.step - before

  report = {}
  job.claims.open(0, 3)
  # A closure of 5 steps to a stop 3 steps away: the stop holds.
  report['applied'] = closure(5)
  report['first'] = job.state()
  # The same closure again, as the coordinator reruns one whose worker
  # failed after it had applied its steps: nothing moves.
  report['rerun_applied'] = closure(5)
  report['rerun'] = job.state()
  report['metric_count'] = float(trainer.loss.count.numpy())
  report['norm_count'] = float(trainer.gradient_norm.count.numpy())
  # A worker that claims a step and dies before its update (a closure of
  # the claim alone, before the round's first): the runner sees the count
  # short after the join and runs the missing step.
  schedule, claim = coordinator.schedule, tf.function(job.claims.claim)

  def claim_then_schedule(*args, **kwargs):
    schedule(claim)
    failing.schedule = schedule  # One such worker.
    return schedule(*args, **kwargs)

  failing = job.coordinator = types.SimpleNamespace(
      schedule=claim_then_schedule, join=coordinator.join)
  run = trainer.runner(coordinator.create_per_worker_dataset(
      strategy.distribute_datasets_from_function(job.dataset)))
  job.coordinator = coordinator
  report["run_returned"] = run(3, 8)[0]
  report['run_step'] = job.step
  return report


def _keras(strategy, coordinator):
  job = _Job(strategy, coordinator)
  with strategy.scope():
    model = keras_fit._FitModel(job)  # pylint: disable=protected-access
    model.compile(optimizer=job.optimizer, loss=job.head.keras_loss(),
                  metrics=job.head.keras_metrics(), steps_per_execution=5)
  data = tf.keras.utils.experimental.DatasetCreator(job.dataset)

  def fit(steps):
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    return job.state()

  report = {}
  job.claims.open(0, 3)
  report['first'] = fit(5)
  report['metrics'] = [metric.name for metric in model.metrics]
  report['first_metric_count'] = float(model.metrics[0].count.numpy())
  report['rerun'] = fit(5)
  report['rerun_metric_count'] = float(model.metrics[0].count.numpy())
  return report


def main():
  strategy = _strategy()
  coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
  print(json.dumps({'ctl': _ctl(strategy, coordinator),
                    'keras': _keras(strategy, coordinator)}))


if __name__ == '__main__':
  main()
