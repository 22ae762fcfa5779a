"""A builder's variable names come from the builder alone (models.build):
not from the strategy, the replica count, synchronized batch norm, the mode,
or how often Keras's name counters ran before in the process. Estimator
checkpoints are keyed by those names; a shifted name fails a restore, or
loads another layer's weights where the shapes agree."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
from estimator_trainer import models
from estimator_trainer.config import TrainConfig
from estimator_trainer.strategy import make_strategy

BUILDER = 'builders:unnamed_cnn'
SHAPE, CLASSES = (28, 28, 1), 10


def _canonical(sync_batch_norm=False):
  """The names of a build in a graph of its own: the builder's alone."""
  return models.check(BUILDER, SHAPE, CLASSES,
                      sync_batch_norm=sync_batch_norm)


def _bump_keras_counters():
  """What a process has often done before it builds the model: built
  another one, e.g. a user's own check in a notebook."""
  models.build(BUILDER, SHAPE, CLASSES)
  tf.keras.layers.Dense(1)


def test_a_second_build_in_the_process_has_the_first_ones_names():
  _bump_keras_counters()
  names = [w.name.split(':')[0]
           for w in models.build(BUILDER, SHAPE, CLASSES).weights]
  assert names == _canonical()
  assert 'conv2d_1/kernel' in names  # Unnamed: Keras's names.


def test_replicas_building_in_one_graph_get_the_builders_names():
  """Estimator under MirroredStrategy: each replica's thread runs model_fn
  in the same graph, switching at each synchronized batch norm's
  all-reduce. Without counters of its own, the first replica's layers were
  conv2d, conv2d_2, conv2d_4, ...: the checkpoint's names, which no other
  build reproduces."""
  strategy = make_strategy('mirrored', cpu_replicas=2)
  names = {}

  def build_and_call():
    model = models.build(BUILDER, SHAPE, CLASSES, sync_batch_norm=True)
    model(tf.zeros([2, *SHAPE]), training=True)
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    names[int(tf.get_static_value(replica))] = [
        w.name.split(':')[0] for w in model.weights]

  with tf.Graph().as_default(), strategy.scope():
    strategy.extended.call_for_each_replica(build_and_call)
  assert names[0] == _canonical(sync_batch_norm=True)


def _stored_names(model_dir, engine):
  """The model's weight names as the model_dir keeps them: an Estimator
  checkpoint's keys (less the optimizer's), or the variables of the TF2
  engines' SavedModel."""
  if engine == 'estimator':
    return {name for name, _ in tf.train.list_variables(
        tf.train.latest_checkpoint(model_dir))
            if name != 'global_step' and '_power' not in name and
            not name.endswith(('/Adam', '/Adam_1'))}
  export = tf.io.gfile.glob(f'{model_dir}/export/final/*')[-1]
  loaded = tf.saved_model.load(export)
  return {v.name.split(':')[0]
          for v in loaded.signatures['serving_default'].variables}


# Where replicas build in one graph: the estimator engine, without
# synchronized batch norm on 1 replica (evaluated and exported on 2), with
# it on 2 (on 1). Mirrored replicas without it build one after the other in
# that graph, the first with the 1-replica build's names: their case added
# no assertion that could fail alone. The TF2 engines: ctl. Keras's fit
# trains the model of the same tf2 Job (models.build under the strategy's
# scope), which the same Controller checkpoints and exports.
CASES = [pytest.param('estimator', replicas, sync, marks=pytest.mark.estimator)
         for replicas, sync in [(0, False), (2, True)]] + [('ctl', 2, True)]


@pytest.mark.slow
@pytest.mark.both_stacks
@pytest.mark.parametrize('engine, replicas, sync_batch_norm', CASES)
def test_every_engine_mode_and_replica_count_keeps_the_names(
    tmp_path, mnist_small_dir, engine, replicas, sync_batch_norm):
  """Train and evaluate (the first evaluation restores the training's
  checkpoint), then evaluate and export under the other replica count, in
  a process whose Keras counters ran before; the estimator engine's model
  carried over to ctl too (each of its name sets once)."""
  _bump_keras_counters()
  model_dir = str(tmp_path / engine)

  def config(mode, replicas, model_dir=model_dir, engine=engine):
    return TrainConfig(
        model_dir=model_dir, mode=mode, engine=engine, dataset='mnist',
        idx_dir=str(mnist_small_dir), model=BUILDER,
        strategy='mirrored' if replicas else 'default', cpu_replicas=replicas,
        sync_batch_norm=sync_batch_norm, global_batch_size=32, train_steps=2,
        throttle_secs=0)

  run = lambda c: engines.ENGINES[c.engine].run(c)
  trained = config('train_and_evaluate', replicas)
  if engine == 'estimator':
    # Its names are the checkpoint's; its export (a PREDICT graph
    # restoring them) is export mode's below.
    trained = dataclasses.replace(trained, export='none')
  trained = run(trained)
  canonical = set(_canonical(sync_batch_norm))
  assert _stored_names(model_dir, engine) == canonical
  other = 0 if replicas else 2
  assert run(config('evaluate', other))['accuracy'] == pytest.approx(
      trained['accuracy'])
  run(config('export', other))
  # Migration reads the checkpoint by the names asserted canonical above:
  # once per name set, with and without sync batch norm (carried to ctl on
  # 2 replicas, and on 1); test_migrate.py's carry the plain model to 1.
  if engine == 'estimator' and (sync_batch_norm or not replicas):
    from estimator_trainer.tf2 import migration  # pylint: disable=g-import-not-at-top
    migrated = str(tmp_path / 'migrated')
    migration.convert(config('train', other, migrated, 'ctl'), model_dir)
    evaluated = run(config('evaluate', other, migrated, 'ctl'))
    assert np.isclose(evaluated['accuracy'], trained['accuracy'])
