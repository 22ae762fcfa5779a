"""The benchmark table: a row per configuration from the runs of every
round, with ratios against model_step (the compute ceiling) and Model.fit,
and the targets of issue 18."""

import statistics

from estimator_trainer.benchmark.runs import CONFIGS, ENGINES


def _key(run):
  return run['config'], run.get('stack'), run.get('variant')


def summarize(runs, flop_per_example):
  """One row per configuration (stack, variant) from the runs of every
  round."""
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
      if CONFIGS[name][0] != 'input':
        row['gflops'] = row['examples_per_second'] * flop_per_example / 1e9
    errors = [run['error'] for run in mine if 'error' in run]
    if errors:
      row['error'] = errors[0]
      row['failed_runs'] = len(errors)
    rows[key] = row
  for (_, stack, _), row in rows.items():
    # Against model_step (the ceiling) and Model.fit of the same stack, fit
    # under the same strategy where it ran.
    strategy = CONFIGS[row['config']][1]
    for column, references in (
        ('vs_step', ['model_step']),
        ('vs_fit', [f'fit_{strategy}', 'fit_default'])):
      reference = next((rows[(name, stack, None)] for name in references
                        if (name, stack, None) in rows), None)
      if reference and 'examples_per_second' in row and (
          'examples_per_second' in reference):
        row[column] = (row['examples_per_second'] /
                       reference['examples_per_second'])
  return list(rows.values())


def label(row):
  """A row's name: its configuration, its variant and its stack, if any."""
  variant = row.get('variant') and f'[{row["variant"]}]'
  return ' '.join(filter(None, (row['config'], variant, row.get('stack'))))


def format_table(rows):
  """The table as text: one line per configuration."""
  width = max(20, *(len(label(row)) for row in rows))
  header = (f'{"configuration":<{width}} {"examples/s":>11} {"range":>15} '
            f'{"vs step":>7} {"vs fit":>7} {"peak RSS MB":>11} '
            f'{"GFLOP/s":>8}')
  lines = [header, '-' * len(header)]
  for row in rows:
    rss = f'{row["peak_rss_mb"]:>11.0f}'
    if 'examples_per_second' not in row:
      lines.append(f'{label(row):<{width}} {"failed":>11} {"":>15} {"":>7} '
                   f'{"":>7} {rss} {"":>8}  {row["error"]}')
      continue
    low, high = row['range']
    ratios = ' '.join(f'{row[column]:>6.2f}x' if column in row else
                      f'{"-":>7}' for column in ('vs_step', 'vs_fit'))
    gflops = f'{row["gflops"]:.1f}' if 'gflops' in row else '-'
    line = (f'{label(row):<{width}} {row["examples_per_second"]:>11,.0f} '
            f'{f"{low:,.0f}-{high:,.0f}":>15} {ratios} {rss} {gflops:>8}')
    if 'error' in row:
      line += f'  ({row["failed_runs"]} run(s) failed: {row["error"]})'
    lines.append(line)
  return '\n'.join(lines)


# Issue 18's targets: every engine within 5 % of model_step, the compute
# ceiling; the estimator engine no slower than a plain Estimator.
STEP_TARGET = 0.95
PLAIN_ESTIMATOR_TARGET = 1.0


def target_lines(rows):
  """One line per target a row has: its ratio, and whether it is met."""
  by_key = {(row['config'], row.get('stack'), row.get('variant')): row
            for row in rows}
  lines = []
  for row in rows:
    kind = CONFIGS[row['config']][0]
    if kind not in ENGINES or 'examples_per_second' not in row:
      continue
    checks = [('model_step', row.get('vs_step'), STEP_TARGET)]
    plain = by_key.get(('estimator_plain', row.get('stack'), None))
    if kind == 'estimator' and plain and 'examples_per_second' in plain:
      checks.append(('estimator_plain', row['examples_per_second'] /
                     plain['examples_per_second'], PLAIN_ESTIMATOR_TARGET))
    for against, ratio, target in checks:
      if ratio is not None:
        verdict = 'met' if ratio >= target else 'NOT met'
        lines.append(f'target {label(row)}: {ratio:.2f}x {against} '
                     f'(>= {target}x) {verdict}')
  return lines
