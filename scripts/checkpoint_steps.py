"""A model_dir's latest checkpoint: the step in its name and the step
counter it holds, for scripts that check a run (chaos_cluster.py)."""

import os


def latest_step(model_dir):
  """The latest checkpoint's step in model_dir's state file; -1 without."""
  try:
    with open(os.path.join(model_dir, 'checkpoint')) as f:
      first = f.readline()
  except OSError:
    return -1
  # model_checkpoint_path: "model.ckpt-300" (estimator) or "ckpt-300".
  return int(first.strip().strip('"').rsplit('-', 1)[1]) if first else -1


def saved_step(model_dir, engine):
  """The step counter model_dir's latest checkpoint holds (estimator:
  global_step; TF2: the optimizer's iterations); None without one."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = tf.train.latest_checkpoint(model_dir)
  return path and int(tf.train.load_variable(path, 'global_step' if engine == (
      'estimator') else 'optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE'))
