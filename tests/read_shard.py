"""Helper of test_cluster_runs: as one task of a TF_CONFIG cluster, reads
this task's training examples the way Estimator does and writes one key per
example to argv[1] (the key is a hash of the image: an example id)."""

import hashlib
import json
import sys

import tensorflow as tf

from estimator_trainer import estimator
from estimator_trainer.config import TrainConfig
from estimator_trainer.data import make_input_fn


def main(out_path, idx_dir, num_examples):
  config = TrainConfig.from_environment(
      model_dir='/tmp/unused', dataset='mnist', idx_dir=idx_dir,
      strategy='multi_worker_mirrored', shuffle_buffer=1000,
      global_batch_size=100)
  strategy = estimator.make_run_config(config).train_distribute
  input_fn = make_input_fn(config, 100)
  shard_size = num_examples // strategy.num_replicas_in_sync
  with tf.Graph().as_default():
    # What Estimator._get_iterator_from_input_fn does under a strategy.
    iterator = strategy.make_input_fn_iterator(
        lambda context: input_fn(tf.estimator.ModeKeys.TRAIN, context))
    features, _ = iterator.get_next()
    images = strategy.experimental_local_results(features['image'])[0]
    keys = []
    # This task's own server, as Estimator's session under the coordinator.
    cluster = config.cluster
    target = 'grpc://' + cluster.jobs[cluster.task_type][cluster.task_index]
    with tf.compat.v1.Session(target) as sess:
      sess.run(iterator.initializer)
      while len(keys) < shard_size:
        keys += [hashlib.sha1(x.tobytes()).hexdigest()
                 for x in sess.run(images)]
  with open(out_path, 'w') as f:
    json.dump(keys[:shard_size], f)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
