"""The benchmark table: a row per configuration from the runs of every
round, with ratios against model_step (the compute ceiling) and Model.fit,
and the targets of issue 18; of the census workload, against the canned
DNNClassifier and plain Keras, with accuracy and AUC, and issue 34's
targets.

A ratio is the median over rounds of the two configurations' rates in the
same round: the machine's speed drifts ~1.4x over minutes, and pairing runs
of one round cancels most of that drift, where a ratio of two medians does
not.
"""

import statistics

from estimator_trainer.benchmark import measure
from estimator_trainer.benchmark.runs import CONFIGS, ENGINES, TABULAR_CONFIGS


def _key(run):
  return run['config'], run.get('stack'), run.get('variant')


def _rates(runs, key):
  """[(round, examples/s)] of `key`'s runs that finished."""
  return [(run.get('round'), run['examples_per_second']) for run in runs
          if _key(run) == key and 'examples_per_second' in run]


def _ratio(runs, key, reference):
  """`key`'s rate over `reference`'s: paired by round where both ran in a
  round, else the ratio of their medians."""
  mine, theirs = _rates(runs, key), _rates(runs, reference)
  if not mine or not theirs:
    return None
  by_round = dict(theirs)
  paired = [rate / by_round[r] for r, rate in mine
            if r is not None and r in by_round]
  if paired:
    return statistics.median(paired)
  return (statistics.median(rate for _, rate in mine) /
          statistics.median(rate for _, rate in theirs))


def summarize(runs, flop_per_example=None):
  """One row per configuration (stack, variant) from the runs of every
  round; GFLOP/s if `flop_per_example` is given."""
  rows = {}
  for key in dict.fromkeys(_key(run) for run in runs):
    name, stack, variant = key
    mine = [run for run in runs if _key(run) == key]
    good = [run['examples_per_second'] for run in mine
            if 'examples_per_second' in run]
    row = {'config': name,
           'peak_rss_mb': max(run['peak_rss_mb'] for run in mine)}
    if stack:
      row['stack'] = stack
    if variant:
      row['variant'] = variant
    if good:
      row['examples_per_second'] = statistics.median(good)
      row['range'] = (min(good), max(good))
      if flop_per_example and CONFIGS[name][0] != 'input':
        row['gflops'] = row['examples_per_second'] * flop_per_example / 1e9
    evaluated = [run['metrics'] for run in mine if 'metrics' in run]
    if evaluated:
      row['metrics'] = {key: statistics.median(m[key] for m in evaluated
                                               if key in m)
                        for key in dict.fromkeys(k for m in evaluated
                                                 for k in m)}
    errors = [run['error'] for run in mine if 'error' in run]
    if errors:
      row['error'] = errors[0]
      row['failed_runs'] = len(errors)
    rows[key] = row
  for key, row in rows.items():
    # Against model_step (the ceiling) and Model.fit of the same stack, fit
    # under the same strategy where it ran; the estimator engines against a
    # plain Estimator.
    _, stack, _ = key
    strategy = CONFIGS[row['config']][1]
    for column, references in (
        ('vs_step', ['model_step']),
        ('vs_fit', [f'fit_{strategy}', 'fit_default']),
        ('vs_plain', ['estimator_plain'] if CONFIGS[row['config']][0] ==
         'estimator' else []),
        ('vs_canned', ['canned_dnn', 'canned_wide_deep']),
        ('vs_keras', ['fit_tabular'])):
      reference = next(((name, stack, None) for name in references
                        if (name, stack, None) in rows), None)
      ratio = reference and _ratio(runs, key, reference)
      if ratio:
        row[column] = ratio
  return list(rows.values())


def label(row):
  """A row's name: its configuration, its variant and its stack, if any."""
  variant = row.get('variant') and f'[{row["variant"]}]'
  return ' '.join(filter(None, (row['config'], variant, row.get('stack'))))


def progress_line(run, rounds):
  """The line a finished run of `rounds` prints: its rate, or its error."""
  rate = run.get('examples_per_second')
  return (f'round {run["round"] + 1}/{rounds} {label(run)}: '
          + (f'failed: {run["error"]}' if 'error' in run else
             f'{rate:,.0f} examples/s')
          + f', {run["peak_rss_mb"]:.0f} MB, {run["seconds"]:.0f} s')


def _is_tabular(rows):
  return any(row['config'] in TABULAR_CONFIGS or 'metrics' in row
             for row in rows)


def format_table(rows):
  """The table as text: one line per configuration. Tabular rows: ratios
  against the canned Estimator and plain Keras, accuracy and AUC; else
  against model_step and Model.fit, GFLOP/s."""
  tabular = _is_tabular(rows)
  ratios = ('vs_canned', 'vs_keras') if tabular else ('vs_step', 'vs_fit')
  last = (f'{"accuracy":>8} {"AUC":>6}' if tabular else f'{"GFLOP/s":>8}')
  width = max(20, *(len(label(row)) for row in rows))
  names = [column.replace('_', ' ') for column in ratios]
  size = max(map(len, names))
  header = (f'{"configuration":<{width}} {"examples/s":>11} {"range":>15} '
            + ' '.join(f'{name:>{size}}' for name in names)
            + f' {"peak RSS MB":>11} {last}')
  lines = [header, '-' * len(header)]
  for row in rows:
    rss = f'{row["peak_rss_mb"]:>11.0f}'
    if 'examples_per_second' not in row:
      lines.append(f'{label(row):<{width}} {"failed":>11} {"":>15} '
                   + ' '.join(f'{"":>{size}}' for _ in ratios)
                   + f' {rss} {"":>{len(last)}}  {row["error"]}')
      continue
    low, high = row['range']
    cells = ' '.join(f'{row[column]:>{size - 1}.2f}x' if column in row else
                     f'{"-":>{size}}' for column in ratios)
    if tabular:
      metrics = row.get('metrics', {})
      tail = ' '.join(f'{metrics[key]:>{size}.4f}' if key in metrics else
                      f'{"-":>{size}}'
                      for key, size in (('accuracy', 8), ('auc', 6)))
    else:
      tail = f'{row["gflops"]:>8.1f}' if 'gflops' in row else f'{"-":>8}'
    line = (f'{label(row):<{width}} {row["examples_per_second"]:>11,.0f} '
            f'{f"{low:,.0f}-{high:,.0f}":>15} {cells} {rss} {tail}')
    if 'error' in row:
      line += f'  ({row["failed_runs"]} run(s) failed: {row["error"]})'
    lines.append(line)
  return '\n'.join(lines)


# Issue 18's targets: every engine within 5 % of model_step, the compute
# ceiling; the estimator engine no slower than a plain Estimator. Issue
# 34's on tabular data: every engine no slower than the canned Estimator
# (DNNClassifier, or DNNLinearCombinedClassifier for wide & deep) and
# within 5 % of plain Keras.
STEP_TARGET = 0.95
PLAIN_ESTIMATOR_TARGET = 1.0
CANNED_TARGET = 1.0
KERAS_TARGET = 0.95


def target_lines(rows):
  """One line per target a row has: its ratio, and whether it is met."""
  lines = []
  for row in rows:
    if CONFIGS[row['config']][0] not in ENGINES:
      continue
    checks = [('model_step', row.get('vs_step'), STEP_TARGET),
              ('estimator_plain', row.get('vs_plain'), PLAIN_ESTIMATOR_TARGET),
              ('canned', row.get('vs_canned'), CANNED_TARGET),
              ('fit_tabular', row.get('vs_keras'), KERAS_TARGET)]
    for against, ratio, target in checks:
      if ratio is not None:
        verdict = 'met' if ratio >= target else 'NOT met'
        lines.append(f'target {label(row)}: {ratio:.2f}x {against} '
                     f'(>= {target}x) {verdict}')
  return lines


def _run_shape(settings, rounds):
  return (f'{settings.steps} steps x {rounds} round(s), batch '
          f'{settings.batch_size} per replica, intervals of '
          f'{settings.summary_steps} steps')


def census_title(schema, file_format, hidden_units, optimizer, learning_rate,
                 settings, rounds):
  """The line above the census workload's table: the data (its files'
  `file_format`), the model, the runs (runs.Settings, `rounds`), the
  machine."""
  return (f'census-like set ({schema["rows"]:,} train, '
          f'{schema["rows"] // 10:,} test rows, {file_format}; test Bayes '
          f'accuracy {schema["test_bayes_accuracy"]:.4f}), MLP '
          f'{"-".join(map(str, hidden_units))}, {optimizer} '
          f'{learning_rate:g}: {_run_shape(settings, rounds)}; '
          f'{measure.machine()}')


def image_title(model, precision, shape, flop_per_example, settings, rounds):
  """The line above the image workload's table (`shape`: synthetic data's,
  None for the default data)."""
  data = 'synthetic ' + 'x'.join(map(str, shape)) if shape else (
      'the default data')
  return (f'{model} ({precision}) on {data}: {_run_shape(settings, rounds)};'
          f' training {flop_per_example / 1e6:.2f} MFLOP/example '
          f'({flop_per_example // measure.TRAIN_FLOP_PER_MAC:,} MACs '
          f'forward); {measure.machine()}')
