"""Infers a feature spec from training data and says why it chose each kind:

  python -m estimator_trainer.tabular.infer --train_files=GLOB --label=COL \
      [--weight=COL] [--head=HEAD] --output=spec.json

It reads the data as a person would (the rule was chosen on twelve real
tables: docs/guide/tabular.md#how-infer-reads-the-data):
- numbers are numbers (float_normalized), integers too, unless they are
  plainly codes: at most --max_codes distinct integers (a store id, a
  class 1..3, a year of a few) become integer_categorical;
- strings, and numbers written with a leading zero (zip codes: 02134 is
  not 2134), are categorical up to --max_categorical distinct values, else
  hashed (num_bins: a power of 2, about twice the distinct values);
- a column with no value, or one value in every record, is left out.
The head from the label: strings are classes (the label vocabulary,
sorted); integers 0..K-1 class ids (K = 2: binary); other integers with at
most --max_codes distinct values classes too, with a vocabulary (1/2 is
binary); other numbers regression; several label columns (--label=a,b)
multilabel. Exit codes: 0, 1 data error, 2 usage error.
"""

import math
import re
import warnings

import numpy as np

from estimator_trainer import console

if __name__ == '__main__':
  # The command prints its choices: TensorFlow's start-up noise hidden,
  # which must happen before the imports below load it; google-api-core's
  # warning about Python 3.11 too (as in run.py).
  warnings.filterwarnings('ignore', category=FutureWarning,
                          module=r'google\.api_core\.')
  console.quiet_tensorflow(verbose=False)

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags

from estimator_trainer import errors
from estimator_trainer import outputs
from estimator_trainer import sources
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import table
from estimator_trainer.tabular import table_files

MAX_CATEGORICAL = 100
# Records read: the first of the files (every rule above is decided well
# on this many; a hashed column's distinct values are counted on them).
MAX_ROWS = 200_000
# Integer columns (and labels) of at most this many distinct values are
# codes: on the twelve tables this rule was chosen on, counts and amounts
# (ages, prices, incomes, weights: 17 to 286 distinct) are numbers, while
# store ids, cylinders, a year of 3 to 7 values are codes.
MAX_CODES = 10
_LIST_DTYPES = {'float_list': 'float32', 'int64_list': 'int64',
                'bytes_list': 'string'}


def infer(source_or_files, label, weight=None, head=None,
          max_categorical=MAX_CATEGORICAL, max_codes=MAX_CODES,
          skip_unlabeled=False, max_rows=MAX_ROWS):
  """(FeatureSpec, lines saying what it chose and why) of the training files
  of a TabularSource, of comma-separated globs or of a list of files;
  `label` a column (or a tuple of 0/1 columns: multilabel), `head` None to
  infer it; `skip_unlabeled`: records without a label are left out (else
  an error naming the first); read from the first `max_rows` records
  (None: all), the first line says when the files have more."""
  if isinstance(source_or_files, str):
    files = sources.glob_files(source_or_files)
  elif isinstance(source_or_files, (list, tuple)):
    files = sorted(set(source_or_files))  # A file named twice read once.
  else:
    files = source_or_files.files(sources.TRAIN)
  if all(table.is_csv(f) for f in files):
    cells = table.read_csv(files, max_rows=max_rows)
  else:
    cells = sources.eagerly(table.read_examples, files, None, max_rows)
  labels = (label,) if isinstance(label, str) else tuple(label)
  for flag, names in (('label', labels), ('weight', (weight,) * bool(weight))):
    for name in names:
      table_files.check_has(files[0], name, list(cells.values), why=f'--{flag}')
  lines = [f'{len(cells.numbers)} records in {len(files)} files']
  if max_rows is not None and len(cells.numbers) >= max_rows:
    lines[0] = (f'the first {len(cells.numbers)} records of {len(files)} '
                'files (--max_rows; the files have more)')
  if skip_unlabeled:
    labeled = np.array([all(cells.values[name][row] is not None
                            for name in labels)
                        for row in range(len(cells.numbers))], bool)
    cells.select(labeled)
    lines.append(f'{int((~labeled).sum())} records without a label left '
                 'out (--skip_rows_without_label)')
  columns = []
  for name, values in cells.values.items():
    if name in labels or name == weight:
      continue
    column, why = _column(name, values, cells, max_categorical, max_codes)
    lines.append(f'{name}: {why}')
    if column:
      columns.append(column)
  head, vocabulary, why = _head(labels, cells, head, max_categorical,
                                max_codes)
  lines.append(f'label {", ".join(labels)}: {why}')
  if weight:
    cells.weight(weight)
    lines.append(f'weight {weight}: a number per record')
  spec = spec_lib.FeatureSpec(
      tuple(columns), label if isinstance(label, str) else labels,
      label_vocabulary=vocabulary, weight=weight, head=head)
  spec_lib.check(spec, 'the inferred spec')
  return spec, lines


# A number written with a leading zero (02134, -007) is a code, not a
# number: as a number it would meet 2134.
_LEADING_ZERO = re.compile(r'[+-]?0[0-9]')


def _dtype(name, values, cells):
  """float32, int64 or string: the list kind (TFRecords), or what every
  present CSV cell parses as (string where one has a leading zero)."""
  if name in cells.kinds:
    return _LIST_DTYPES[cells.kinds[name]]
  present = [v for v in values if v is not None]
  if any(_LEADING_ZERO.match(v) for v in present):
    return 'string'
  for dtype, convert in (('int64', int), ('float32', float)):
    try:
      for value in present:
        convert(value)
      return dtype
    except ValueError:
      pass
  return 'string'


def _column(name, values, cells, max_categorical, max_codes):
  """(Column or None, why)."""
  missing = sum(v is None for v in values)
  if missing == len(values):
    return None, f'left out: no values ({cells.missing} everywhere)'
  note = f'; {missing} of {len(values)} missing' if missing else ''
  dtype = _dtype(name, values, cells)
  present = [v for v in values if v is not None]
  distinct = len(set(map(float, present)) if dtype != 'string' else
                 set(present))
  if distinct == 1:
    return None, f'left out: one value ({present[0]!r}) in every record'
  if dtype == 'int64' and distinct <= max_codes:
    return (spec_lib.Column(name, 'integer_categorical'),
            f'integer_categorical ({distinct} distinct integers <= '
            f'{max_codes}: codes{note})')
  if dtype != 'string':
    if dtype == 'float32':
      cells.typed(name, dtype, 0.0)  # Finite numbers, or a DataError.
    imputed = '; imputed with their mean' if missing else ''
    what = 'numbers' if dtype == 'float32' else (
        f'{distinct} distinct integers > {max_codes}: numbers')
    # TFRecords' integers are parsed as int64_list (CSV's as numbers).
    as_int64 = dtype == 'int64' and name in cells.kinds
    return (spec_lib.Column(name, 'float_normalized',
                            dtype='int64' if as_int64 else None),
            f'float_normalized ({what}{note}{imputed})')
  codes = any(_LEADING_ZERO.match(v) for v in present)
  what = 'strings' + (' (numbers with leading zeros: codes)' if codes else '')
  if distinct <= max_categorical:
    return (spec_lib.Column(name, 'string_categorical'),
            f'string_categorical ({distinct} distinct {what} <= '
            f'{max_categorical}{note})')
  num_bins = 2 ** math.ceil(math.log2(2 * distinct))
  return (spec_lib.Column(name, 'string_hashed', num_bins=num_bins),
          f'string_hashed, num_bins {num_bins} ({distinct} distinct {what} '
          f'> {max_categorical}: a power of 2 about twice that{note})')


def _head(labels, cells, head, max_categorical, max_codes):
  """(head, label_vocabulary, why) of the label column(s)."""
  if len(labels) > 1:
    if head not in (None, 'multilabel'):
      raise UsageError(f'--head={head} takes one label column, got '
                       f'{", ".join(labels)}')
    for name in labels:
      cells.label(name, spec_lib.FeatureSpec((), labels, head='multilabel'))
    return 'multilabel', None, f'multilabel ({len(labels)} label columns)'
  name = labels[0]
  dtype = _dtype(name, cells.values[name], cells)
  cells.check_labeled(name)
  values = cells.typed(name, dtype)
  classes = sorted(set(values.tolist()))
  if len(classes) < 2:
    raise DataError(f'{cells.files[0]}: the label {name!r} has one value '
                    f'({classes[0]!r}) in every record')
  if dtype == 'string':
    inferred = 'binary' if len(classes) == 2 else 'multiclass'
    return (head or inferred, tuple(classes),
            f'{head or inferred} ({len(classes)} distinct strings: the label '
            f'vocabulary, sorted: {", ".join(classes)})')
  if head in (None, 'binary', 'multiclass') and dtype == 'int64':
    inferred = 'binary' if len(classes) == 2 else 'multiclass'
    if classes == list(range(len(classes))) and (
        head or len(classes) <= max_categorical):
      return (head or inferred, None,
              f'{head or inferred} (integers 0..{len(classes) - 1})')
    if head or len(classes) <= max_codes:
      if name in cells.kinds:  # An int64_list: parsed as class ids only.
        raise DataError(
            f"{cells.files[0]}: the label {name!r} has the integers "
            f"{', '.join(map(str, classes[:5]))}{', ...' * (len(classes) > 5)}"
            ', not class ids 0..K-1: write them as class ids, or as strings '
            '(a bytes_list: the label vocabulary), or pass --head=regression')
      # The cells as written ('+1' stays '+1'): what the label parses as.
      vocabulary = tuple(sorted({v for v in cells.values[name]},
                                key=lambda v: (int(v), v)))
      return (head or inferred, vocabulary,
              f'{head or inferred} ({len(classes)} distinct integers, not '
              f'0..K-1: the label vocabulary, sorted: {", ".join(vocabulary)})')
  if head in (None, 'regression'):
    why = (f'{len(classes)} distinct integers > {max_codes}' if dtype ==
           'int64' else 'numbers')
    return 'regression', None, ('regression' if head else
                                f'regression ({why})')
  return head, None, f'{head} (--head)'


def _define_flags():
  flags.DEFINE_string('train_files', None, 'Comma-separated globs of the '
                      'training data: CSV (.csv, .csv.gz) or TFRecords of '
                      'tf.Example.')
  flags.DEFINE_list('label', None, 'The label column (multilabel: several).')
  flags.DEFINE_string('weight', None, 'The weight column, if any.')
  flags.DEFINE_enum('head', None, spec_lib.HEADS, 'The head (default: '
                    'inferred from the label).')
  flags.DEFINE_integer('max_categorical', MAX_CATEGORICAL, 'String columns '
                       'of up to this many distinct values are categorical, '
                       'of more hashed.', lower_bound=1)
  flags.DEFINE_integer('max_codes', MAX_CODES, 'Integer columns (and labels) '
                       'of up to this many distinct values are codes '
                       '(categorical; a label: classes), of more numbers.',
                       lower_bound=1)
  flags.DEFINE_bool('skip_rows_without_label', False, 'Leave out the records '
                    'whose label is missing (else an error naming one).')
  flags.DEFINE_integer('max_rows', MAX_ROWS, 'Infer from the first this '
                       'many records (0: all of them).', lower_bound=0)
  flags.DEFINE_string('output', None, 'Where to write the spec (JSON).')


def main(argv):
  with errors.reported():
    values = flags.FLAGS
    if len(argv) > 1:
      raise UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
    for name in ('train_files', 'label', 'output'):
      if not values[name].value:
        raise UsageError(f'--{name} is required')
    label = values.label[0] if len(values.label) == 1 else tuple(values.label)
    spec, lines = infer(values.train_files, label, values.weight,
                        values.head, values.max_categorical,
                        values.max_codes, values.skip_rows_without_label,
                        values.max_rows or None)
    outputs.write_atomic(values.output, spec_lib.to_json(spec))
    for line in lines:
      print(line)
    print(f'wrote {values.output}')


def run():
  _define_flags()
  app.run(main, flags_parser=errors.parse_flags)


if __name__ == '__main__':
  run()
