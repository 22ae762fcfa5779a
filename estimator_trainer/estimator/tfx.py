"""TFX's Trainer entry point (Estimator flavour): `trainer_fn`."""

from estimator_trainer import export as export_lib
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
from estimator_trainer.estimator import job as job_lib


def trainer_fn(trainer_fn_args, schema=None):
  """TFX Trainer module function (Estimator flavour).

  Reads `train_files`, `eval_files` (lists of TFRecord globs of our
  tf.Example), `serving_model_dir` (used as model_dir, as in TFX's examples),
  `train_steps` and `eval_steps` from `trainer_fn_args`, and any other
  TrainConfig field from its `custom_config` (TFX's Trainer
  `custom_config`), e.g. structured data's `feature_spec`, `head` and
  `model`; `schema` is not needed (the feature spec or the image format
  says what to parse). Returns `estimator`, `train_spec` and
  `eval_spec` for `tf.estimator.train_and_evaluate`, with a final exporter,
  and TFMA's `eval_input_receiver_fn` (needs the `tfx` extra).
  """
  del schema
  args = trainer_fn_args
  config = TrainConfig.from_environment(
      model_dir=args.serving_model_dir,
      train_files=','.join(args.train_files),
      eval_files=','.join(args.eval_files),
      train_steps=args.train_steps, export='final',
      **(getattr(args, 'custom_config', None) or {}))
  job_lib.check_engine(config, 'trainer_fn (TFX\'s Estimator Trainer)')
  if config.validation_fraction:  # TFX runs train_and_evaluate: no restore.
    raise UsageError('validation_fraction: not in trainer_fn (TFX calls '
                     'train_and_evaluate, which would not restore the best '
                     'step); run estimator_trainer.train_and_evaluate')
  # TFMA exports the eval graph; images rendered in Python cannot be in it.
  job = job_lib.Job(config, eval_images=False)
  train_spec, eval_spec = job.specs(
      [], alone=config.cluster is None,
      eval_steps=getattr(args, 'eval_steps', None))
  return {
      'estimator': job.estimator,
      'train_spec': train_spec,
      'eval_spec': eval_spec,
      'eval_input_receiver_fn': export_lib.eval_input_receiver_fn(
          job.example_format),
  }
