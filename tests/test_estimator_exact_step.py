"""The estimator engine's final step under parameter servers is exact: each
step claims its count on the global step before its update (ModelParams'
step_limit, estimator/step_apply.py), so that a worker that stepped from
max_steps - 1 while another did applies nothing and counts nothing.

Two workers on one parameter server, without a cluster: two graphs of
model_fn's TRAIN spec (as each worker of a cluster builds its own) on one
in-process server, whose variables they share; one worker's step after the
other's stands for two steps begun together, the second to reach the
global step losing."""

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import summaries
from estimator_trainer.config import TrainConfig

estimator = pytest.importorskip('estimator_trainer.estimator',
                                exc_type=ImportError)
# pylint: disable=g-import-not-at-top,g-bad-import-order
from estimator_trainer.estimator import train_loop
from estimator_trainer.estimator.params import model_params

pytestmark = pytest.mark.estimator

MAX_STEPS = 2


def _params(**kwargs):
  # The params of a run's Job under parameter servers; a cosine rate, 0 at
  # MAX_STEPS: the last step applies its own step's rate, not the next's.
  config = TrainConfig(model_dir='/tmp/unused', engine='estimator',
                       strategy='parameter_server', optimizer='sgd',
                       learning_rate=0.1, lr_decay='cosine', seed=1, **kwargs)
  return model_params(config, 4, MAX_STEPS)


class _Worker:
  """A worker's train graph and session on the server at `target`."""

  def __init__(self, target, params, seed):
    self.graph = tf.Graph()
    with self.graph.as_default():
      features = {'image': tf.random.uniform([4, 28, 28, 1], seed=seed)}
      self.spec = estimator.model_fn(
          features, tf.constant([0, 1, 2, 3], tf.int64),
          tf.estimator.ModeKeys.TRAIN, params)
      self.step = tf.compat.v1.train.get_global_step()
      self.weights = tf.compat.v1.trainable_variables()
      self.initialize = tf.compat.v1.global_variables_initializer()
      self.session = tf.compat.v1.Session(target, graph=self.graph)

  def values(self):
    return self.session.run([self.step, self.weights])

  def close(self):
    self.session.close()


@pytest.fixture
def workers():
  server = tf.distribute.Server.create_local_server()
  made = []

  def make(params, count=2):
    made.extend(_Worker(server.target, params, seed) for seed in
                range(1, count + 1))
    first = made[0]
    with first.graph.as_default():  # The chief's; the others share them.
      first.session.run(first.initialize)
      first.step.load(MAX_STEPS - 1, first.session)
    return made
  yield make
  for worker in made:
    worker.close()


def _assert_same(weights, others):
  for a, b in zip(weights, others):
    np.testing.assert_array_equal(a, b)


def test_the_second_worker_to_step_from_the_last_step_but_one_applies_nothing(
    workers):
  first, second = workers(_params())
  step, before = second.values()
  assert step == MAX_STEPS - 1
  first.session.run(first.spec.train_op)
  step, after_first = second.values()
  assert step == MAX_STEPS
  # Of the last step's own rate (cosine at MAX_STEPS - 1: half of 0.1).
  assert any(not np.array_equal(a, b) for a, b in zip(before, after_first))
  # Today's canned StopAtStepHook lets this one through: MAX_STEPS + 1.
  with pytest.raises(tf.errors.OutOfRangeError):
    second.session.run(second.spec.train_op)
  step, after_second = first.values()
  assert step == MAX_STEPS
  _assert_same(after_first, after_second)
  # At max_steps, a step of either does nothing.
  with pytest.raises(tf.errors.OutOfRangeError):
    first.session.run(first.spec.train_op)
  step, last = second.values()
  assert step == MAX_STEPS
  _assert_same(after_first, last)


def test_a_refused_step_ends_a_workers_training_loop_quietly(workers):
  """As Estimator's loop runs the train op in a MonitoredSession, with its
  StopAtStepHook: the OutOfRangeError ends it as the input's end does, its
  hooks' end() run."""
  first, second = workers(_params())
  first.session.run(first.spec.train_op)
  ended = []

  class EndHook(tf.compat.v1.train.SessionRunHook):
    def end(self, session):
      ended.append(session.run(second.step))

  with second.graph.as_default():
    with tf.compat.v1.train.MonitoredSession(
        session_creator=tf.compat.v1.train.WorkerSessionCreator(
            master=first.session.sess_str),
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=MAX_STEPS),
               EndHook()]) as session:
      runs = 0
      while not session.should_stop():
        runs += 1
        session.run(second.spec.train_op)
  assert runs == 1 and ended == [MAX_STEPS]


def test_a_skipped_float16_step_is_counted_once_by_its_claim(workers):
  """--precision=mixed_float16's skipped step (an overflow) counts without
  the optimizer: claimed, it is not counted again. (The CLI refuses float16
  under parameter servers; model_fn's step_limit takes it.)"""
  config = TrainConfig(model_dir='/tmp/unused', engine='estimator',
                       optimizer='sgd', precision='mixed_float16', seed=1)
  (worker,) = workers({**model_params(config, 4, MAX_STEPS),
                       'step_limit': MAX_STEPS}, count=1)
  with worker.graph.as_default():
    scale, skipped = (
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES,
                                    f'mixed_float16/{name}')[0]
        for name in ('loss_scale', 'skipped_steps'))
    scale.load(2.0**100, worker.session)  # Every float16 gradient overflows.
  _, before = worker.values()
  worker.session.run(worker.spec.train_op)
  step, after = worker.values()
  assert step == MAX_STEPS and worker.session.run(skipped) == 1
  _assert_same(before, after)


def test_the_chiefs_refused_last_step_still_ends_its_progress_and_rates(
    workers, tmp_path):
  """The chief's TrainLoopHook sees the end in end(): a refused run has no
  after_run, which wrote the whole run's rate at the last step."""
  first, chief = workers(_params())
  with first.graph.as_default():
    first.step.load(MAX_STEPS - 2, first.session)
  config = TrainConfig(model_dir=str(tmp_path), engine='estimator',
                       strategy='parameter_server')
  with chief.graph.as_default():
    tf.compat.v1.losses.add_loss(chief.spec.loss)  # As Estimator does.
    with tf.compat.v1.train.MonitoredSession(
        session_creator=tf.compat.v1.train.WorkerSessionCreator(
            master=first.session.sess_str),
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=MAX_STEPS),
               train_loop.TrainLoopHook(
                   config, MAX_STEPS, 4, 1, 1, train_loop.SaveClock(),
                   'loss')]) as session:
      runs = 0
      while not session.should_stop():
        runs += 1
        session.run(chief.spec.train_op)
        if runs == 1:  # The other worker takes the last step meanwhile.
          first.session.run(first.spec.train_op)
  rates = [(event.step, value.tag) for path in tmp_path.glob('events.*')
           for event in tf.compat.v1.train.summary_iterator(str(path))
           for value in event.summary.value
           if value.tag == summaries.RUN_RATE]
  assert runs == 2 and rates == [(MAX_STEPS, summaries.RUN_RATE)]
