"""The model_dir layout: checkpoint steps and the one event-file reader."""

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import layout


def test_checkpoint_step_of_either_engine():
  assert layout.checkpoint_step('/m/model.ckpt-1000') == 1000
  assert layout.checkpoint_step('/m-1/ckpt-7') == 7


def test_read_scalars_reads_v1_and_v2_summaries_and_skips_the_rest(tmp_path):
  # v2 (the TF2 engines): float32 and float64 scalar tensors, an image.
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default():
    for step in (2, 1):
      tf.summary.scalar('loss', 1.0 / step, step=step)
    tf.summary.scalar('rate', tf.constant(0.25, tf.float64), step=1)
    tf.summary.image('picture', np.zeros([1, 4, 4, 1], np.float32), step=1)
  writer.close()
  # v1 (Estimator): simple_value.
  with tf.Graph().as_default():
    v1 = tf.compat.v1.summary.FileWriter(str(tmp_path))
    v1.add_summary(tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
        tag='accuracy', simple_value=0.5)]), 3)
    v1.close()

  scalars = layout.read_scalars(str(tmp_path))
  assert scalars['loss'] == [(1, 1.0), (2, 0.5)]
  assert scalars['rate'] == [(1, 0.25)]
  assert scalars['accuracy'] == [(3, 0.5)]
  assert 'picture' not in scalars
  assert layout.read_scalars(str(tmp_path / 'missing')) == {}


@pytest.mark.parametrize('path, expected', [
    (layout.metrics_file('/m'), '/m/metrics.json'),
    (layout.eval_dir('/m'), '/m/eval'),
    (layout.export_dir('/m', 'best'), '/m/export/best'),
    (layout.finished_file('/m', 'worker', 1), '/m/finished/worker-1.json'),
    (layout.scratch_dir('/m', 'worker', 1), '/m/tmp_worker_1'),
])
def test_paths_are_the_documented_ones(path, expected):
  assert path == expected


def test_absolute_makes_each_local_pattern_absolute(tmp_path, monkeypatch):
  """Each of comma-separated patterns (run_record.of took the whole string
  as one path: 'a.csv,b.csv' kept b.csv relative to wherever a resume ran),
  remote ones as they are."""
  monkeypatch.chdir(tmp_path)
  assert layout.absolute('a.csv,data/b*.csv,gs://bucket/c.csv') == (
      f'{tmp_path}/a.csv,{tmp_path}/data/b*.csv,gs://bucket/c.csv')
  assert layout.absolute(None) is None
