"""Large variables split across parameter servers, so no single ps holds a
large embedding whole: the partitioner of TF2's ParameterServerStrategy,
the Embedding layer that partitions its table in the estimator engine's
graph (TF1's ParameterServerStrategy), and the chief's line saying where
each partitioned variable's shards went.

Both engines split the same variables the same way
(`tf.compat.v1.min_max_variable_partitioner`, which TF2's
MinSizePartitioner calls): along the rows, into at most one shard per ps,
each at least MIN_SHARD_BYTES. A checkpoint keys a partitioned variable by
its whole name and shape (slices of it), so a model built without a
strategy (the evaluator, the export, migrate) or over another number of
parameter servers restores it.
"""

import logging

import tensorflow as tf

_logger = logging.getLogger(__name__)

# A variable of at most 1 MiB stays whole: a shard costs a request per step,
# and no built-in image model has one as large (cnn's largest is 400 KB), so
# they train as before. Canned Estimators' input layer took 64 MiB: smaller
# here, so that tables of a million rows are spread too.
MIN_SHARD_BYTES = 1 << 20


def tf2_partitioner(num_ps):
  """TF2 ParameterServerStrategy's `variable_partitioner` over `num_ps`
  parameter servers."""
  return tf.distribute.experimental.partitioners.MinSizePartitioner(
      min_shard_bytes=MIN_SHARD_BYTES, max_shards=max(num_ps, 1))


def _v1_partitioner():
  """The partitioner of a variable created now: in a graph under TF1's
  ParameterServerStrategy (the estimator engine's) with more than one ps;
  else None (TF2's strategy partitions by itself, see tf2_partitioner)."""
  if tf.executing_eagerly() or not tf.distribute.has_strategy():
    return None
  strategy = tf.distribute.get_strategy()
  if not isinstance(strategy,
                    tf.compat.v1.distribute.experimental.ParameterServerStrategy):
    return None
  num_ps = len(strategy.extended.parameter_devices)
  if num_ps < 2:
    return None
  return tf.compat.v1.min_max_variable_partitioner(
      max_partitions=num_ps, min_slice_size=MIN_SHARD_BYTES)


def _shards(variable):
  """The shards of a partitioned (TF1) or sharded (TF2) variable, else
  None."""
  if isinstance(variable, tf.__internal__.distribute.ShardedVariable):
    return list(variable.variables)
  if hasattr(variable, '_variable_list'):  # Not in TF2's API: as Keras tells.
    return list(variable)
  return None


def _task(device):
  spec = tf.DeviceSpec.from_string(device)
  return f'/job:{spec.job}/replica:{spec.replica or 0}/task:{spec.task}'


def placement(name, variable):
  """'NAME [rows, ...]: K shards, rows R on DEVICE, ...' of a partitioned
  variable, else None."""
  shards = _shards(variable)
  if not shards or len(shards) < 2:
    return None
  shape = [sum(shard.shape[0] for shard in shards), *shards[0].shape[1:]]
  return (f'{name} {shape}: {len(shards)} shards, ' + ', '.join(
      f'rows {shard.shape[0]} on {_task(shard.device)}' for shard in shards))


def log_placement(name, variable):
  """Logs `placement` on the chief (the task that saves checkpoints)."""
  line = placement(name, variable)
  if line and tf.distribute.get_strategy().extended.should_checkpoint:
    _logger.info('Partitioned %s', line)


def _partitioned_getter(partitioner):
  """An `add_weight` getter creating a partitioned variable named as the
  layer's unpartitioned one (its name scope's), as canned Estimators'
  input_layer_partitioner did."""
  def getter(name, shape, dtype, initializer, trainable, **kwargs):
    del kwargs  # Keras's variable options, of unpartitioned variables.
    scope = tf.compat.v1.get_default_graph().get_name_scope()
    with tf.compat.v1.variable_scope(scope, auxiliary_name_scope=False):
      return tf.compat.v1.get_variable(
          name, shape, dtype, initializer=initializer, trainable=trainable,
          partitioner=partitioner, use_resource=True)
  return getter


@tf.keras.utils.register_keras_serializable(package='estimator_trainer')
class Embedding(tf.keras.layers.Embedding):
  """tf.keras.layers.Embedding whose table a parameter-server run splits
  across the ps tasks (TF1's strategy: a partitioned variable in the graph;
  TF2's: its variable_partitioner), the chief logging where the shards
  went. Elsewhere Keras's layer, its weights named and saved as it."""

  def build(self, input_shape=None):
    partitioner = _v1_partitioner()
    if partitioner is None:
      super().build(input_shape)
    else:
      self.embeddings = self.add_weight(
          shape=(self.input_dim, self.output_dim),
          initializer=self.embeddings_initializer, name='embeddings',
          regularizer=self.embeddings_regularizer,
          constraint=self.embeddings_constraint, experimental_autocast=False,
          getter=_partitioned_getter(partitioner))
      self.built = True
    log_placement(f'{self.name}/embeddings', self.embeddings)
