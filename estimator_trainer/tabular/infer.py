"""Infers a feature spec from training data and says why it chose each kind:

  python -m estimator_trainer.tabular.infer --train_files=GLOB --label=COL \
      [--weight=COL] [--head=HEAD] --output=spec.json

It reads the data as a person would (the rule was chosen on twelve real
tables, integers on 24: docs/guide/tabular.md#how-infer-reads-the-data):
- numbers are numbers (float_normalized), integers too (survey levels,
  counts, a class 1..3: the order is information, as the baseline a data
  scientist runs first reads them), unless named as ids (store_id,
  StoreID, zip_code: integer_categorical, hashed beyond --max_categorical
  distinct values); a CSV column is numbers when 95 % of its present cells
  are (NA, null, ... are missing: cell_syntax.py), its other cells errors
  of the run;
- strings, and numbers written with a leading zero (zip codes: 02134 is
  not 2134), are categorical up to --max_categorical distinct values, else
  hashed (num_bins: a power of 2, about twice the distinct values);
- a column with no value, or one value in every record, is left out; a
  CSV column with no value in the first --max_rows records is decided on
  the records after, a CSV label of one class there on all records.
The head from the label: strings are classes (the label vocabulary,
sorted); integers 0..K-1 class ids (K = 2: binary); other integers with at
most --max_codes distinct values classes too, with a vocabulary (1/2 is
binary); other numbers regression; several label columns (--label=a,b)
multilabel. Exit codes: 0, 1 data error, 2 usage error.
"""

import numpy as np

from estimator_trainer import console

if __name__ == '__main__':
  # The command prints its choices: TensorFlow's start-up noise hidden
  # (google-api-core's warning too), which must happen before the imports
  # below load it.
  console.quiet_tensorflow(verbose=False)

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags

from estimator_trainer import errors
from estimator_trainer import outputs
from estimator_trainer import sources
from estimator_trainer.errors import DataError, UsageError
from estimator_trainer.tabular import cell_syntax
from estimator_trainer.tabular import infer_rules
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import table

MAX_CATEGORICAL = 100
# Records read: the first of the files (every rule above is decided well
# on this many; a hashed column's distinct values are counted on them).
MAX_ROWS = 200_000
# Integer labels of at most this many distinct values are classes (a
# 1/2 label is binary); of more, a regression.
MAX_CODES = 10


def infer(source_or_files, label, weight=None, head=None,
          max_categorical=MAX_CATEGORICAL, max_codes=MAX_CODES,
          skip_unlabeled=False, max_rows=MAX_ROWS, missing_values=None,
          flags=('--label', '--weight'), key=None):
  """(FeatureSpec, lines saying what it chose and why) of the training files
  of a TabularSource, of comma-separated globs or of a list of files;
  `label` a column (or a tuple of 0/1 columns: multilabel), `head` None to
  infer it; `skip_unlabeled`: records without a label are left out (else
  an error naming the first); read from the first `max_rows` records
  (None: all), the first line says when the files have more;
  `missing_values`: the cells of a number column that are missing (with an
  empty cell; None: cell_syntax.MISSING_VALUES), kept in the spec;
  `flags`: the command's names of `label` and `weight`, which a column the
  files lack is the usage error of; `key`: a column left out (a run's
  --key_column names rows, it is no feature)."""
  if isinstance(source_or_files, str):
    files = sources.glob_files(source_or_files)
  elif isinstance(source_or_files, (list, tuple)):
    files = sorted(set(source_or_files))  # A file named twice read once.
  else:
    files = source_or_files.files(sources.TRAIN)
  csv = all(table.is_csv(f) for f in files)
  if csv:
    cells = table.read_csv(files, max_rows=max_rows)
  else:
    cells = sources.eagerly(table.read_examples, files, None, max_rows)
  missing = frozenset(cell_syntax.missing_values(missing_values))
  cells.missing_values = missing
  if not cells.numbers:
    raise DataError(f'{", ".join(files)}: no records to infer a spec from'
                    f'{" (a header only)" * csv}')
  labels = (label,) if isinstance(label, str) else tuple(label)
  for flag, names in zip(flags, (labels, (weight,) * bool(weight))):
    for name in names:
      if name not in cells.values:
        raise UsageError(f'{files[0]}: no column {name!r} ({flag} names it);'
                         f' its columns: {", ".join(cells.values)}')
  lines = [f'{len(cells.numbers)} records in {len(files)} files']
  # Read in part: what the first records lack is looked for in the rest.
  read = len(cells.numbers)
  sample = max_rows is not None and read >= max_rows
  if sample:
    lines[0] = (f'the first {len(cells.numbers)} records of {len(files)} '
                'files (--max_rows; the files have more)')
  label_dtypes = {name: infer_rules.label_dtype(name, cells)
                  for name in labels}
  if skip_unlabeled:
    labeled = np.array([all(not cells.absent(cells.values[name][row],
                                             label_dtypes[name])
                            for name in labels)
                        for row in range(len(cells.numbers))], bool)
    cells.select(labeled)
    lines.append(f'{int((~labeled).sum())} records without a label left '
                 'out (--skip_rows_without_label)')
    if not labeled.any():
      raise DataError(f'{", ".join(files)}: no record has a label')
  columns = []
  for name, values in cells.values.items():
    if name in labels or name == weight:
      continue
    if name == key:
      lines.append(f'{name}: the key (--key_column), not a feature')
      continue
    column, why = infer_rules.column(name, values, cells, max_categorical)
    if column is None and sample and csv and all(
        cells.absent(v, 'float32') for v in values):
      column, why = _later(files, name, read, max_rows, max_categorical,
                           missing)
    lines.append(f'{name}: {why}')
    if column:
      columns.append(column)
  head, vocabulary, why = _head(labels, cells, head, max_categorical,
                                max_codes, sample, csv, skip_unlabeled,
                                missing)
  lines.append(f'label {", ".join(labels)}: {why}')
  if weight:
    cells.weight(weight)
    lines.append(f'weight {weight}: a number per record')
  spec = spec_lib.FeatureSpec(
      tuple(columns), label if isinstance(label, str) else labels,
      label_vocabulary=vocabulary, weight=weight, head=head,
      missing_values=missing_values and tuple(missing_values))
  spec_lib.check(spec, 'the inferred spec')
  return spec, lines


def _later(files, name, start, max_rows, max_categorical, missing):
  """(Column or None, why) of a CSV column with no value in its first
  `start` records: of its first `max_rows` values in the records after."""
  later = table.read_csv_present(files, name, start, max_rows)
  later.missing_values = missing
  if not later.numbers:
    return None, (f'left out: no values ({later.missing} in all '
                  f'{start + later.skipped} records)')
  column, why = infer_rules.column(name, later.values[name], later,
                                   max_categorical)
  first = f'{later.files[later.file_index[0]]} line {later.numbers[0]}'
  return column, (f'no values in the first {start} records, so from the '
                  f'{len(later.numbers)} values after (the first: {first}): '
                  f'{why}')


def _head(labels, cells, head, max_categorical, max_codes, sampled, csv,
          skip_unlabeled, missing):
  """infer_rules.head; a CSV label of one value in a sample of the files
  (`sampled`: a file sorted by class?) has its classes from all of them."""
  name = labels[0]
  if len(labels) > 1 or not sampled or len(set(
      v for v in cells.values[name] if v is not None)) > 1:
    return infer_rules.head(labels, cells, head, max_categorical, max_codes)
  if not csv:
    return infer_rules.head(
        labels, cells, head, max_categorical, max_codes,
        f' of the first {len(cells.numbers)} (--max_rows=0 reads all)')
  whole = table.read_csv_present(cells.files, name, distinct=True)
  whole.missing_values = missing
  if skip_unlabeled:
    dtype = infer_rules.label_dtype(name, whole)
    whole.select(np.array([not whole.absent(v, dtype)
                           for v in whole.values[name]], bool))
  head, vocabulary, why = infer_rules.head(labels, whole, head,
                                           max_categorical, max_codes)
  return head, vocabulary, (f'{why}; one class in the first '
                            f'{len(cells.numbers)} records, these of all')


def _define_flags():
  flags.DEFINE_string('train_files', None, 'Comma-separated globs of the '
                      'training data: CSV (.csv, .csv.gz) or TFRecords of '
                      'tf.Example.')
  flags.DEFINE_list('label', None, 'The label column (multilabel: several).')
  flags.DEFINE_string('weight', None, 'The weight column, if any.')
  flags.DEFINE_string('key_column', None, "A column naming the rows, left "
                      "out of the spec (a run's --key_column).")
  flags.DEFINE_enum('head', None, spec_lib.HEADS, 'The head (default: '
                    'inferred from the label).')
  flags.DEFINE_integer('max_categorical', MAX_CATEGORICAL, 'String columns '
                       'of up to this many distinct values are categorical, '
                       'of more hashed.', lower_bound=1)
  flags.DEFINE_integer('max_codes', MAX_CODES, 'Integer labels of up to this '
                       'many distinct values are classes, of more a '
                       'regression (integer columns are numbers unless '
                       'named as ids).', lower_bound=1)
  flags.DEFINE_bool('skip_rows_without_label', False, 'Leave out the records '
                    'whose label is missing (else an error naming one).')
  flags.DEFINE_integer('max_rows', MAX_ROWS, 'Infer from the first this '
                       'many records (0: all of them).', lower_bound=0)
  flags.DEFINE_list('missing_values', None, 'The cells of a number column '
                    'that are missing values, besides an empty cell (e.g. '
                    "'?'); default: pandas' list (NA, N/A, null, NaN, ...).")
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
                        values.max_rows or None, values.missing_values,
                        key=values.key_column)
    outputs.write_atomic(values.output, spec_lib.to_json(spec))
    for line in lines:
      print(line)
    print(f'wrote {values.output}')


def run():
  _define_flags()
  app.run(main, flags_parser=errors.parse_flags)


if __name__ == '__main__':
  run()
