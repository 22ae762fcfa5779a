"""A multi-worker peer lost while a TF2 task builds its model (its weights
are broadcast then) is a lost peer, not the builder's fault (issue 73, item
1: the chaos script's chief killed at the start of training made its
worker exit 2 with '--model dnn raised UnavailableError: ...'); and so is
one that restarted while training; and a TF2 parameter-server chief's lost
ps is said so (it printed 'error: UnavailableError: Graph execution
error:')."""

from unittest import mock

import pytest
import tensorflow as tf

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import models
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError, UsageError
from estimator_trainer.tf2 import controller
from estimator_trainer.watchdog import PEER_LOST, PS_LOST

_LOST = tf.errors.UnavailableError(
    None, None, 'Collective ops is aborted by: failed to connect to all '
    'addresses')


def _broadcast_fails(input_shape, num_classes):
  del input_shape, num_classes
  raise _LOST


def test_a_tensorflow_runtime_error_of_the_builder_is_no_usage_error():
  with pytest.raises(tf.errors.UnavailableError) as raised:
    models.build(_broadcast_fails, (28, 28, 1), 10)
  assert raised.value is _LOST
  assert not isinstance(raised.value, UsageError)


# Of a peer that restarted before gRPC gave it up (the chaos script's
# chief, its worker killed and restarted: 'error: AbortedError: Graph
# execution error:').
_RESTARTED = tf.errors.AbortedError(
    None, None, 'Collective ops is aborted by: Error reported from '
    '/job:worker/task:0: /job:worker/replica:0/task:0 unexpectedly tried to '
    'connect with a different incarnation. It has likely restarted.')


@pytest.mark.parametrize('mode', ['train_and_evaluate', 'train'])
def test_a_peer_lost_while_the_model_is_built_is_said_so(tmp_path, mode):
  config = TrainConfig(
      model_dir=str(tmp_path), engine='ctl', dataset='mnist',
      strategy='multi_worker_mirrored', cluster=cluster_lib.Cluster(
          jobs={'chief': ['localhost:1'], 'worker': ['localhost:2']},
          task_type='worker', task_index=0, has_evaluator=False))
  modes = controller.engine_modes(run=None)
  run = {'train_and_evaluate': modes[0], 'train': modes[1]}[mode]
  with mock.patch.object(controller, '_training_job', side_effect=_LOST), \
      pytest.raises(TrainerError, match=f'^{PEER_LOST}$'):
    run(config)


def test_a_peer_restarted_while_training_is_a_lost_peer(tmp_path):
  config = TrainConfig(
      model_dir=str(tmp_path), engine='ctl', dataset='mnist',
      strategy='multi_worker_mirrored', cluster=cluster_lib.Cluster(
          jobs={'chief': ['localhost:1'], 'worker': ['localhost:2']},
          task_type='chief', task_index=0, has_evaluator=False))

  def run(job, evaluate):
    del job, evaluate
    raise _RESTARTED

  with mock.patch.object(controller, '_training_job'), pytest.raises(
      TrainerError, match=f'^{PEER_LOST}$'):
    controller.engine_modes(run)[0](config)


# What the chief's ClusterCoordinator raises when a ps dies (TensorFlow
# names the remote target; a PSUnavailableError is one).
_PS_GONE = tf.errors.UnavailableError(
    None, None, 'Graph execution error:\n\nDetected at node ... '
    'failed to connect to all addresses\nAdditional GRPC error information '
    'from remote target /job:ps/replica:0/task:1')


@pytest.mark.parametrize('error', [
    _PS_GONE, tf.errors.AbortedError(None, None, str(_PS_GONE))])
@pytest.mark.parametrize('mode', ['train_and_evaluate', 'train'])
def test_a_parameter_server_lost_while_training_is_said_so(
    tmp_path, mode, error):
  config = TrainConfig(
      model_dir=str(tmp_path), engine='ctl', dataset='mnist',
      strategy='parameter_server', cluster=cluster_lib.Cluster(
          jobs={'chief': ['localhost:1'], 'worker': ['localhost:2'],
                'ps': ['localhost:3', 'localhost:4']},
          task_type='chief', task_index=0, has_evaluator=False))

  def run(job, evaluate):
    del job, evaluate
    raise error

  modes = controller.engine_modes(run)
  run_mode = {'train_and_evaluate': modes[0], 'train': modes[1]}[mode]
  with mock.patch.object(controller, '_training_job'), pytest.raises(
      TrainerError, match=f'^{PS_LOST}$'):
    run_mode(config)


def test_an_unavailable_error_outside_a_cluster_is_left_as_it_is(tmp_path):
  config = TrainConfig(model_dir=str(tmp_path), engine='ctl',
                       dataset='mnist')

  def run(job, evaluate):
    del job, evaluate
    raise _PS_GONE

  with mock.patch.object(controller, '_training_job'), pytest.raises(
      tf.errors.UnavailableError):
    controller.engine_modes(run)[0](config)
