"""--validation_fraction's best step, the same in every engine (the
estimator engine's exporter, the TF2 controller): early stopping ranks the
evaluations of the validation part (model_dir/eval_validation), never the
evaluation split; the best one's checkpoint is kept apart from
--keep_checkpoint_max's rotation (model_dir/best_validation) and, at the
end, made model_dir's latest checkpoint again, so that the final
evaluation, metrics.json, the final export and later predictions are of
it.

Both live in model_dir: a run resumed after Ctrl-C or SIGTERM compares with
the best so far, not with nothing.
"""

import json
import logging
import os

import tensorflow as tf

from estimator_trainer import early_stopping
from estimator_trainer import layout
from estimator_trainer import outputs

_logger = logging.getLogger(__name__)

_RECORD = 'best.json'  # The kept checkpoint's name, step and score.


def _copy(source, target):
  """Copies a file whole: a reader never finds part of it under `target`."""
  tf.io.gfile.copy(source, f'{target}.tmp', overwrite=True)
  tf.io.gfile.rename(f'{target}.tmp', target, overwrite=True)


class Best:
  """The validation evaluations of model_dir so far and the checkpoint of
  the best (the first of equal scores, as early_stopping ranks them).

  In a multi-worker cluster each worker evaluates the same records together
  and decides alike; only the chief (`writes`) keeps files: the others read
  its record as they start, and its copy of the best at the end."""

  def __init__(self, model_dir, patience, writes=True):
    self._model_dir = model_dir
    self._writes = writes
    self._dir = layout.best_dir(model_dir)
    self._patience = patience
    self.scores = early_stopping.eval_accuracies(
        layout.validation_eval_dir(model_dir))
    path = os.path.join(self._dir, _RECORD)
    self.kept = (layout.read_json(path, 'the best validation step')
                 if tf.io.gfile.exists(path) else None)

  def after(self, checkpoint_path, result):
    """After `result`, the validation evaluation of the checkpoint at
    `checkpoint_path`: keeps that checkpoint when it is the best so far.
    Returns whether training should stop (--early_stopping_evals)."""
    step, score = int(result['global_step']), early_stopping.score(result)
    self.scores[step] = score
    if self.kept is None or score > self.kept['score']:
      self.kept = {'checkpoint': os.path.basename(checkpoint_path),
                   'step': step, 'score': score}
      if self._writes:
        self._keep(checkpoint_path)
    return early_stopping.no_improvement(self.scores, self._patience,
                                         layout.VALIDATION)

  def _keep(self, checkpoint_path):
    """Copies the checkpoint's files, then records it: a copy cut short
    leaves the record of the one before, whose files are removed last."""
    tf.io.gfile.makedirs(self._dir)
    name = self.kept['checkpoint']
    for path in tf.io.gfile.glob(f'{checkpoint_path}.*'):
      _copy(path, os.path.join(self._dir, os.path.basename(path)))
    outputs.write_atomic(os.path.join(self._dir, _RECORD),
                         json.dumps(self.kept) + '\n')
    for path in tf.io.gfile.glob(os.path.join(self._dir, '*')):
      if not os.path.basename(path).startswith((f'{name}.', _RECORD)):
        tf.io.gfile.remove(path)

  def restore(self):
    """Makes the kept checkpoint model_dir's latest (its files copied back
    where the rotation removed them) and says so; returns its path (another
    worker's: the chief's copy)."""
    name = self.kept['checkpoint']
    _logger.info('Early stopping: restored step %d, the best on the '
                 'validation split', self.kept['step'])
    if not self._writes:
      return os.path.join(self._dir, name)
    path = os.path.join(self._model_dir, name)
    for kept in tf.io.gfile.glob(os.path.join(self._dir, f'{name}.*')):
      _copy(kept, os.path.join(self._model_dir, os.path.basename(kept)))
    # The state file as CheckpointManager writes it (relative names: the
    # model_dir may move), the kept one the newest, last of the rotation.
    state = tf.train.get_checkpoint_state(self._model_dir)
    names = [*(other for other in (
        os.path.basename(p) for p in (
            state.all_model_checkpoint_paths if state else []))
               if other != name), name]
    outputs.write_atomic(
        os.path.join(self._model_dir, layout.CHECKPOINT_STATE_FILE),
        f'model_checkpoint_path: "{name}"\n' + ''.join(
            f'all_model_checkpoint_paths: "{other}"\n' for other in names))
    return path
