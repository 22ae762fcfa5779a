"""TrainConfig's fields of the data a run reads from files: the training,
evaluation and prediction files, structured data's spec, head and
options (config.py declares them; each is used by it once)."""

from estimator_trainer import config_checks
from estimator_trainer.config_checks import DEFAULT_EVAL_FRACTION, HEADS

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
