"""tf.distribute strategies from the config, and logical CPU replicas."""

import logging

import tensorflow as tf

from estimator_trainer import partitioning
from estimator_trainer.errors import TrainerError

_logger = logging.getLogger(__name__)

_COMMUNICATION = {
    'auto': tf.distribute.experimental.CommunicationImplementation.AUTO,
    'ring': tf.distribute.experimental.CommunicationImplementation.RING,
    'nccl': tf.distribute.experimental.CommunicationImplementation.NCCL,
}


def configure_cpu_replicas(num_replicas):
  """Splits the CPU into `num_replicas` logical devices (0 or 1: no split).

  Lets `mirrored` run several replicas on a machine without GPUs. Must run
  before TensorFlow initializes its devices.
  """
  if num_replicas <= 1:
    return
  cpu = tf.config.list_physical_devices('CPU')[0]
  wanted = [tf.config.LogicalDeviceConfiguration()] * num_replicas
  try:
    tf.config.set_logical_device_configuration(cpu, wanted)
  except RuntimeError:
    # Already initialized: fine if it already has the split we want.
    if len(tf.config.list_logical_devices('CPU')) != num_replicas:
      raise TrainerError(
          f'cannot split the CPU into {num_replicas} replicas: TensorFlow was '
          'initialized before with another device layout') from None


def configure_threads(intra_op_threads, inter_op_threads):
  """Thread pools of eager ops and tf.functions (0: TensorFlow's choice).

  Must run before TensorFlow initializes its devices; v1 sessions take the
  same numbers from their ConfigProto.
  """
  threading = tf.config.threading
  try:
    if threading.get_intra_op_parallelism_threads() != intra_op_threads:
      threading.set_intra_op_parallelism_threads(intra_op_threads)
    if threading.get_inter_op_parallelism_threads() != inter_op_threads:
      threading.set_inter_op_parallelism_threads(inter_op_threads)
  except RuntimeError:
    raise TrainerError(
        'cannot set --intra_op_threads/--inter_op_threads: TensorFlow was '
        'initialized before with other thread pools') from None


def replica_devices(cpu_replicas):
  """Devices `mirrored` uses: every GPU, else `cpu_replicas` logical CPUs."""
  if tf.config.list_physical_devices('GPU'):
    return None  # MirroredStrategy's default: all GPUs.
  return [f'/cpu:{i}' for i in range(max(cpu_replicas, 1))]


# Group keys per strategy: more than one strategy takes (one per device set).
_GROUPS_PER_STRATEGY = 1000


def _own_collective_groups(strategy_class):
  """Gives the next `strategy_class` collective group keys no strategy of
  the process used before.

  Every MirroredStrategy numbers its all-reduces' group and instance keys
  from the same start, and the process's collective executor keeps each
  key's tensor shape: a second strategy in the process (a pipeline training
  a second model, a notebook) whose first all-reduce is of another shape
  failed with 'Shape mismatch in the collective instance 100'.
  """
  strategy_class._collective_key_base += _GROUPS_PER_STRATEGY  # pylint: disable=protected-access


def make_strategy(name, cpu_replicas=0, communication='auto',
                  coordinated=False):
  """The strategy named `name`, or None for `default` (no strategy).

  `parameter_server` is TensorFlow 2's, driven by a ClusterCoordinator, when
  `coordinated` (the TF2 engines), its large variables split across the ps
  tasks (partitioning.py); else TensorFlow 1's, which Estimator drives (its
  graph partitions: partitioning.Embedding).
  """
  if name == 'default':
    return None
  if name == 'one_device':
    device = '/gpu:0' if tf.config.list_physical_devices('GPU') else '/cpu:0'
    strategy = tf.distribute.OneDeviceStrategy(device)
  elif name == 'mirrored':
    configure_cpu_replicas(cpu_replicas)
    _own_collective_groups(tf.distribute.MirroredStrategy)
    strategy = tf.distribute.MirroredStrategy(replica_devices(cpu_replicas))
  elif name == 'multi_worker_mirrored':
    # The `experimental` class is the one Estimator supports (graph mode).
    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy(
        communication=_COMMUNICATION[communication])
  elif name == 'parameter_server' and coordinated:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # Every run's, images' too: only variables over MIN_SHARD_BYTES split.
    strategy = tf.distribute.ParameterServerStrategy(
        resolver, variable_partitioner=partitioning.tf2_partitioner(
            resolver.cluster_spec().num_tasks('ps')))
  elif name == 'parameter_server':
    strategy = tf.compat.v1.distribute.experimental.ParameterServerStrategy()
  else:
    raise ValueError(f'unknown strategy {name!r}')
  _logger.info('Strategy %s: %d replica(s) in sync', name,
               strategy.num_replicas_in_sync)
  return strategy


def num_replicas(strategy):
  return strategy.num_replicas_in_sync if strategy else 1
