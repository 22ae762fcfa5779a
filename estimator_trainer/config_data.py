"""TrainConfig's fields of the data a run reads from files: the training,
evaluation and prediction files, structured data's spec, head and
options (config.py declares them; each is used by it once), and the checks
of the parts held out of the training records."""

from estimator_trainer import config_checks
from estimator_trainer import engines
from estimator_trainer.config_checks import DEFAULT_EVAL_FRACTION, HEADS
from estimator_trainer.errors import UsageError

_option = config_checks.option

TRAIN_FILES = _option(
    None,
    'Glob of TFRecord files of tf.Example (--image_key, --label_key) to '
    'train on, instead of --dataset; needs --eval_files. With '
    '--feature_spec: structured data, CSV files with a header row '
    '(.csv, .csv.gz) or TFRecords of tf.Example keyed by column; without '
    '--eval_files, --eval_fraction of them is held out.')
EVAL_FILES = _option(
    None, 'Glob of files to evaluate and predict on.')
EVAL_FRACTION = _option(
    None, 'Without --eval_files: evaluate (and predict) '
    'on this fraction of the training files\' records, chosen by a hash of '
    f'each record and left out of training; default {DEFAULT_EVAL_FRACTION}.',
    above=0)
VALIDATION_FRACTION = _option(
    None, 'Hold out this fraction of the training records (by a hash of '
    'each, apart from --eval_fraction\'s) as a validation part, train on '
    'the rest, evaluate it at each evaluation (eval_validation/), stop on '
    'it by --early_stopping_evals and restore the best step\'s weights at '
    'the end; the evaluation split never decides. Default: none.',
    above=0)
CV_FOLD = _option(
    None, 'K,N: cross-validation on the training records: train on those '
    'outside fold K of N (by a hash of each record; --eval_fraction\'s part '
    'left out) and evaluate on fold K (--eval_files unread). A run that '
    'chooses its length makes such runs (docs/guide/tabular.md).',
    parse=config_checks.ints('cv_fold', 2))
SKIP_ROWS_WITHOUT_LABEL = _option(
    False, 'Leave out the records whose label is missing (an empty cell, '
    'an absent feature), from training, evaluation and the statistics, '
    'and log how many; without it such a record is an error naming it.')
UNREADABLE_AS_MISSING = _option(
    False, 'Read a CSV cell of a number column that is no number (a word: '
    '"unknown") as a missing value, and log how many per file; without '
    'it such a cell is an error naming it.')
FEATURE_SPEC = _option(
    None, 'The JSON (or YAML) file of the columns\' '
    'kinds, crosses, label and weight column (`python -m '
    'estimator_trainer.tabular.infer` writes one from the data). Without '
    'it, CSV training files\' spec is inferred as that command does (the '
    'label: --label_key), printed and stored in the model_dir.')
HEAD = _option(
    None, 'multiclass (softmax cross-entropy), binary '
    '(sigmoid cross-entropy), multilabel (sigmoid cross-entropy per label) '
    'or regression (squared error); default: the feature spec\'s. Images '
    'are multiclass.', choices=HEADS)
HUBER_DELTA = _option(
    None, '--head=regression: Huber loss with this delta instead of the '
    'squared error.', above=0)
PREDICT_FILES = _option(
    None, '--mode=predict on these files (comma-separated globs; CSV or '
    'TFRecords, with or without the label column), not the evaluation '
    'split: every record, with the feature spec and statistics stored in '
    '--model_dir (nothing else is needed).')
KEY_COLUMN = _option(
    None, 'A column that names each record, not a feature: --mode=predict '
    'writes its value with each prediction, and the exports\' predict '
    'signatures take it in and return it (canned forward_features). '
    'Without it, a prediction names its file and line (CSV) or record '
    '(TFRecords).')


def check(config):
  """The UsageErrors of the held-out parts' bad combinations."""
  _check_validation(config)
  if config.cv_fold is None:
    return
  number, folds = config.cv_fold
  if not config.structured:
    raise UsageError('--cv_fold is for structured data (--feature_spec, or '
                     'CSV files)')
  if folds < 2 or number > folds:
    raise UsageError(f'--cv_fold={number},{folds}: fold K of N folds, '
                     '1 <= K <= N, N >= 2')
  if config.validation_fraction:
    raise UsageError('--cv_fold with --validation_fraction: give one part '
                     'to evaluate on')


def _check_validation(config):
  """--validation_fraction: a part of structured training records that
  early stopping ranks (the UsageErrors of its bad combinations)."""
  fraction = config.validation_fraction
  if fraction is None:
    return
  if not config.structured:
    raise UsageError('--validation_fraction is for structured data '
                     '(--feature_spec, or CSV files); images have no '
                     'validation part')
  if fraction >= 1:
    raise UsageError(f'--validation_fraction={fraction}: a fraction of the '
                     'training records, between 0 and 1')
  if not config.early_stopping_evals:
    raise UsageError('--validation_fraction needs --early_stopping_evals=N: '
                     'the evaluations without a better validation score '
                     'after which training stops')
  if config.cluster and (config.engine not in engines.TF2_ENGINES or
                         config.cluster.has_evaluator or
                         config.strategy == 'parameter_server'):
    raise UsageError(
        '--validation_fraction in a cluster: only the TF2 engines under '
        'multi_worker_mirrored without an evaluator task, whose workers '
        'evaluate it together, for now (issue 72)')
