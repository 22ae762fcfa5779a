"""An experiment (issue 72, item 3): the deep model's L2 chosen per table on
a validation part of the TRAINING split. Per table of
benchmark/real_tables.py, trains `--model` with each candidate
`--weight_decay` (the linear prior of r rows: 0.5/r, a regression's label
variance/r, for the rules of r below, from the n rows of train.csv) and
`--validation_fraction`, one evaluation at the last step; chooses the
candidate of the lowest validation average loss (log loss; a regression's
squared error), retrains it on all training rows, and prints each run's
evaluation-split score beside LogisticRegression / Ridge. Appends each run
to <work_dir>/runs.jsonl as it ends.

  python scripts/l2_on_validation.py --work_dir=/tmp/l2 [--tables=pima]
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags

from estimator_trainer import layout
from estimator_trainer.benchmark import real_tables

# name -> the rows r of the prior, from the training rows n.
RULES = {
    'n/3': lambda n: n / 3,
    'n/10': lambda n: n / 10,
    'n/30': lambda n: n / 30,
    'max(50,n/100)': lambda n: max(50, n / 100),
}

flags.DEFINE_string('work_dir', None, 'Where the splits and model_dirs go.')
flags.DEFINE_list('tables', list(real_tables.TABLES), 'The tables.')
flags.DEFINE_list('rules', list(RULES), 'The candidates.')
# Named apart from run's flags: a test imports this module beside the
# package's (absl refuses a flag defined twice).
flags.DEFINE_string('deep_model', 'dnn', 'The model (--model).')
flags.DEFINE_string('deep_engine', 'ctl', 'The engine (--engine).')
flags.DEFINE_float('held_out', 0.2, 'The validation part '
                   '(--validation_fraction).')
flags.DEFINE_bool('retrain', True, 'Retrain the chosen on all rows.')
flags.DEFINE_bool('report_only', False, 'Print the table of '
                  '<work_dir>/runs.jsonl only.')
FLAGS = flags.FLAGS


def _run(train, test, spec_path, model_dir, weight_decay, validating):
  """(evaluation-split metrics, validation average loss or None)."""
  subprocess.run(['rm', '-rf', model_dir], check=True)
  # The length its figures were measured at
  # (docs/guide/tabular-measurements.md), which a run of a small table now
  # chooses by cross-validation unless given.
  command = real_tables.run_command(
      train, test, spec_path, FLAGS.deep_model, FLAGS.deep_engine, model_dir,
      f'--weight_decay={weight_decay}', '--train_steps=2000')
  if validating:
    # One evaluation, at the last step: the candidate's own end point, not
    # an early-stopped one.
    command += [f'--validation_fraction={FLAGS.held_out}',
                '--early_stopping_evals=1',
                '--save_checkpoints_steps=1000000']
  done = subprocess.run(command, capture_output=True, text=True, check=False)
  if done.returncode:
    sys.exit(f'error: {model_dir}: {done.stderr.strip().splitlines()[-1:]}')
  with open(layout.metrics_file(model_dir)) as f:
    metrics = json.load(f)
  loss = None
  if validating:
    loss = layout.read_scalars(
        layout.validation_eval_dir(model_dir))['average_loss'][-1][1]
  return metrics, loss


def _table(name, log):
  table = real_tables.TABLES[name]
  directory = os.path.join(FLAGS.work_dir, name)
  train, test, spec_path, _, _ = real_tables.write_inferred(name, directory)
  rows = real_tables.split(name)[0]
  n = len(rows)
  scale = (float(rows[table.label].var(ddof=0))
           if table.head == 'regression' else 0.5)
  metric = real_tables.score_name(table.head)
  base = real_tables.baselines(name)
  runs = []
  for rule in FLAGS.rules:
    weight_decay = scale / RULES[rule](n)
    metrics, loss = _run(train, test, spec_path,
                         os.path.join(directory, f'val-{rule}'),
                         weight_decay, validating=True)
    runs.append({'table': name, 'n': n, 'rule': rule,
                 'weight_decay': weight_decay, 'validation_loss': loss,
                 'score': metrics[metric],
                 'log_loss': metrics['average_loss'], 'metric': metric,
                 'baseline': base['linear'],
                 'baseline_log_loss': base['linear_log_loss'],
                 'all_rows': False})
    log(runs[-1])
  chosen = min(runs, key=lambda run: run['validation_loss'])
  if FLAGS.retrain:
    metrics, _ = _run(train, test, spec_path,
                      os.path.join(directory, f'all-{chosen["rule"]}'),
                      chosen['weight_decay'], validating=False)
    log(dict(chosen, validation_loss=None, score=metrics[metric],
             log_loss=metrics['average_loss'], all_rows=True))


def main(argv):
  del argv
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  path = os.path.join(FLAGS.work_dir, 'runs.jsonl')

  def log(run):
    with open(path, 'a') as f:
      f.write(json.dumps(run) + '\n')
    print(json.dumps(run), flush=True)

  for name in [] if FLAGS.report_only else FLAGS.tables:
    _table(name, log)
  _report(path, FLAGS.rules)


def _meets(run):
  """Issue 72's bar: within 0.01 AUC/accuracy and 5 % log loss, or 5 %
  RMSE, of LogisticRegression / Ridge."""
  return real_tables.meets_bar(run['score'], run['log_loss'],
                              run['baseline'], run['baseline_log_loss'])


def _cell(run):
  text = f'{run["score"]:.4g}'
  if run['baseline_log_loss'] is not None:
    change = run['log_loss'] / run['baseline_log_loss'] - 1
    text += f' ({change:+.1%})'
  return text


def _report(path, rules):
  """The runs of `path` as a Markdown table: evaluation-split score (a
  classifier's log loss over LogisticRegression's), the validation loss
  in brackets, * today's default rule."""
  with open(path) as f:
    runs = [json.loads(line) for line in f]
  print('| table (n, metric) | LogisticRegression / Ridge | '
        + ' | '.join(rules) + ' | chosen | chosen, all rows | meets |')
  print('|---' * (len(rules) + 5) + '|')
  for name in dict.fromkeys(run['table'] for run in runs):
    of = {run['rule']: run for run in runs
          if run['table'] == name and not run['all_rows']}
    last = [run for run in runs if run['table'] == name and run['all_rows']]
    if not of or not last:
      continue
    some = next(iter(of.values()))
    n = some['n']
    default = 'n/10' if n <= 500 else 'max(50,n/100)'
    cells = [(f'{_cell(of[rule])} [{of[rule]["validation_loss"]:.4g}]'
              + ('*' if rule == default else '')) if rule in of else ''
             for rule in rules]
    chosen = last[-1]
    print(f'| {name} ({n}, {some["metric"]}) | {some["baseline"]:.4g}'
          + (f' ({some["baseline_log_loss"]:.4g})'
             if some['baseline_log_loss'] is not None else '')
          + ' | ' + ' | '.join(cells) + f' | {chosen["rule"]} | '
          f'{_cell(chosen)} | {"yes" if _meets(chosen) else "no"} |')


if __name__ == '__main__':
  # Required of the command only: a test imports this module beside the
  # package's commands, whose in-process flag parsing would require it too.
  flags.mark_flag_as_required('work_dir')
  app.run(main)
