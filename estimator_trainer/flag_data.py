"""Which data each TrainConfig field (flag) applies to: images, structured
data, or both. --help and the flag reference say it first; a structured
run's record leaves out the settings of images it never read."""

IMAGES = ('dataset', 'train_split', 'eval_split', 'image_size', 'augment',
          'data_source', 'data_dir', 'idx_dir', 'image_key', 'image_shape',
          'num_classes')
STRUCTURED = ('eval_fraction', 'validation_fraction', 'cv_fold',
              'skip_rows_without_label',
              'unreadable_as_missing', 'feature_spec', 'head', 'huber_delta',
              'linear_optimizer', 'linear_learning_rate',
              'linear_optimizer_kwargs', 'predict_files', 'key_column')
# Listed too, so that a new field must be placed (tests/test_config.py).
BOTH = ('model_dir', 'mode', 'engine', 'model', 'model_kwargs',
        'sync_batch_norm', 'bn_recompute_batches', 'train_files',
        'eval_files', 'label_key', 'strategy', 'eval_strategy',
        'communication', 'cpu_replicas', 'intra_op_threads',
        'inter_op_threads', 'batch_size_per_replica', 'global_batch_size',
        'optimizer', 'optimizer_kwargs', 'learning_rate', 'lr_decay',
        'weight_decay', 'clip_global_norm', 'accumulate_steps', 'ema_decay',
        'label_smoothing', 'precision', 'train_steps', 'train_epochs',
        'shuffle_buffer', 'seed', 'steps_per_loop', 'save_checkpoints_steps',
        'save_summary_steps', 'log_step_count_steps', 'keep_checkpoint_max',
        'throttle_secs', 'export', 'exports_to_keep', 'early_stopping_evals',
        'warm_start_from', 'warm_start_vars', 'num_predictions',
        'predictions_file', 'cluster_timeout_secs')
_LABELS = {**{name: '[images]' for name in IMAGES},
           **{name: '[structured data]' for name in STRUCTURED},
           **{name: '[images, structured data]' for name in BOTH}}


def help_text(name, text):
  """Flag `name`'s help `text` preceded by the data it applies to (a field
  not placed here yet, by nothing: tests/test_config.py fails on it)."""
  return f'{_LABELS[name]} {text}' if name in _LABELS else text
