"""The benchmark table: a row per configuration from the runs of every
round, with ratios against Model.fit and the issue targets."""

import statistics

from estimator_trainer.benchmark.runs import CONFIGS


def _key(run):
  return run['config'], run.get('stack')


def summarize(runs, flop_per_example):
  """One row per configuration (and stack) from the runs of every round."""
  rows = {}
  for key in dict.fromkeys(_key(run) for run in runs):
    name, stack = key
    mine = [run for run in runs if _key(run) == key]
    good = [run['examples_per_second'] for run in mine
            if 'examples_per_second' in run]
    row = {'config': name,
           'peak_rss_mb': max(run['peak_rss_mb'] for run in mine)}
    if stack:
      row['stack'] = stack
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
  for (_, stack), row in rows.items():
    # Against Model.fit of the same stack under the same strategy, else
    # without one.
    strategy = CONFIGS[row['config']][1]
    reference = (rows.get((f'fit_{strategy}', stack)) or
                 rows.get(('fit_default', stack)))
    if reference and 'examples_per_second' in row and (
        'examples_per_second' in reference):
      row['ratio'] = (row['examples_per_second'] /
                      reference['examples_per_second'])
  return list(rows.values())


def label(row):
  """A row's name: its configuration, and its stack when there are two."""
  return ' '.join(filter(None, (row['config'], row.get('stack'))))


def format_table(rows):
  """The table as text: one line per configuration."""
  width = max(20, *(len(label(row)) for row in rows))
  header = (f'{"configuration":<{width}} {"examples/s":>11} {"range":>15} '
            f'{"vs fit":>7} {"peak RSS MB":>11} {"GFLOP/s":>8}')
  lines = [header, '-' * len(header)]
  for row in rows:
    rss = f'{row["peak_rss_mb"]:>11.0f}'
    if 'examples_per_second' not in row:
      lines.append(f'{label(row):<{width}} {"failed":>11} {"":>15} {"":>7} '
                   f'{rss} {"":>8}  {row["error"]}')
      continue
    low, high = row['range']
    ratio = f'{row["ratio"]:.2f}x' if 'ratio' in row else '-'
    gflops = f'{row["gflops"]:.1f}' if 'gflops' in row else '-'
    line = (f'{label(row):<{width}} {row["examples_per_second"]:>11,.0f} '
            f'{f"{low:,.0f}-{high:,.0f}":>15} {ratio:>7} {rss} {gflops:>8}')
    if 'error' in row:
      line += f'  ({row["failed_runs"]} run(s) failed: {row["error"]})'
    lines.append(line)
  return '\n'.join(lines)


# The targets: examples/s of a kind of row against Model.fit under
# the same strategy; the input pipeline against the fastest training row.
TARGETS = {'estimator': 1.5, 'ctl': 1.2, 'input': 5.0}


def target_lines(rows):
  """One line per row with a target: its ratio, and whether it is met."""
  training = [row['examples_per_second'] for row in rows
              if CONFIGS[row['config']][0] not in ('input', 'step') and
              'examples_per_second' in row]
  lines = []
  for row in rows:
    kind = CONFIGS[row['config']][0]
    if kind not in TARGETS or 'examples_per_second' not in row:
      continue
    if kind == 'input':
      if not training:
        continue
      ratio, against = (row['examples_per_second'] / max(training),
                        'the fastest training row')
    elif 'ratio' in row:
      ratio, against = row['ratio'], 'Model.fit'
    else:
      continue
    verdict = 'met' if ratio >= TARGETS[kind] else 'NOT met'
    lines.append(f'target {label(row)}: {ratio:.2f}x {against} '
                 f'(>= {TARGETS[kind]}x) {verdict}')
  return lines
