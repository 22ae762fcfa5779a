"""The TF2 engines' cluster tasks that do not train: under parameter servers
the ps tasks and the workers (the chief's ClusterCoordinator sends them the
steps), and the evaluator, which evaluates each new checkpoint, exports and
writes metrics.json, as the estimator engine's evaluator does."""

import logging

import tensorflow as tf

from estimator_trainer import cluster as cluster_lib
from estimator_trainer import outputs
from estimator_trainer import training_progress
from estimator_trainer.tf2 import evaluation
from estimator_trainer.tf2 import export

_logger = logging.getLogger(__name__)


def serves(config):
  """Whether this task only serves: a ps task, or a worker under parameter
  servers."""
  cluster = config.cluster
  return bool(cluster) and (cluster.task_type == cluster_lib.PS or (
      config.strategy == 'parameter_server' and not cluster.is_chief))


def serve(config):
  """Serves until the chief has trained to the end; returns None."""
  training_progress.serve(
      config, lambda training, max_steps: training.chief_finished(max_steps))


def evaluate_until_trained(config):
  """The evaluator task: evaluates each new checkpoint until the last one
  (training_progress.follow_checkpoints), exporting as `--export` says;
  writes metrics.json of the last. Restarted after the end, what is left
  (training_progress.finish_ended)."""
  if training_progress.training_ended(config):
    return training_progress.finish_ended(
        config, lambda: evaluation.final_evaluation(config))

  def start():
    evaluator = evaluation.CheckpointEvaluator(config)
    exporter = (export.Exporter(config, evaluator.model, evaluator.job.head,
                                evaluator.job.example_format)
                if config.export != 'none' else None)

    def export_final(path, result):
      del path  # The model holds the checkpoint just evaluated.
      if exporter:
        exporter.after_evaluation(result, final=True)

    return (lambda path, is_final: _evaluate_and_export(
        evaluator, exporter, path, is_final), evaluator.evaluate,
            export_final)

  return outputs.write_eval_metrics(
      config.model_dir, training_progress.follow_checkpoints(config, start))


def _evaluate_and_export(evaluator, exporter, path, is_final):
  """The evaluation of the checkpoint at `path`, exported (as the final one
  when `is_final(evaluation)`); None when training deleted it first
  (--keep_checkpoint_max)."""
  try:
    result = evaluator.evaluate(path)
  except (ValueError, tf.errors.NotFoundError):
    if tf.io.gfile.exists(f'{path}.index'):
      raise
    _logger.warning('%s was deleted before its evaluation ended: evaluating '
                    'a newer one', path)
    return None
  if exporter:
    exporter.after_evaluation(result, is_final(result))
  return result
