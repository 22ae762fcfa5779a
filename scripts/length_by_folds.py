"""An experiment (issue 72, item 2): the length of `dnn` / `wide_deep`
chosen per table by k-fold cross-validation on the TRAINING split. Per
table of benchmark/real_tables.py and fold, trains `--deep_model` on the
other folds' rows for each candidate `--train_steps` (with the spec of the
whole training split, so the normalization and the L2 are the final
run's) and evaluates the held-out fold; the candidate of the lowest mean
held-out loss (log loss; a regression's squared error) is chosen, and
the shortest within one standard error of it (the rule a run now applies
itself: estimator_trainer/length_choice.py). Then
trains each candidate on all training rows and prints their
evaluation-split scores, the chosen one marked, beside LogisticRegression /
Ridge. Appends each run to <work_dir>/runs.jsonl as it ends and skips the
runs already there (an interrupted command resumes).

  python scripts/length_by_folds.py --work_dir=/tmp/length [--tables=pima]
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags
import numpy as np

from estimator_trainer import layout
from estimator_trainer import length_choice
from estimator_trainer.benchmark import real_tables

FLAGS = flags.FLAGS


def _define_flags():
  """The command's flags (defined by the command only: a test imports this
  module beside other scripts that define some of the same names)."""
  flags.DEFINE_string('work_dir', None, 'Where the splits and model_dirs go.')
  flags.DEFINE_list('tables', list(real_tables.TABLES), 'The tables.')
  flags.DEFINE_list('lengths', ['2000', '4000', '8000'], 'The candidate '
                    '--train_steps.')
  flags.DEFINE_integer('folds', 5, 'k of the k-fold cross-validation.')
  flags.DEFINE_integer('run_seed', 42, 'The runs\' --seed; it shuffles the '
                       'folds too.')
  flags.DEFINE_string('deep_model', 'dnn', 'The model (--model).')
  flags.DEFINE_string('deep_engine', 'ctl', 'The engine (--engine).')
  flags.DEFINE_integer('jobs', 2, 'Runs at once.')
  flags.DEFINE_bool('report_only', False, 'Print the table of '
                    '<work_dir>/runs.jsonl only.')


def fold_masks(rows, folds, seed):
  """`folds` boolean masks over `rows` rows: disjoint, together all rows,
  each a shuffled 1/folds of them."""
  # 1000 + seed: a shuffle apart from real_tables.split's (seed 0).
  order = np.random.default_rng(1000 + seed).permutation(rows)
  masks = []
  for fold in range(folds):
    mask = np.zeros(rows, bool)
    mask[order[fold::folds]] = True
    masks.append(mask)
  return masks


def _key(run):
  return (run['table'], run['model'], run['seed'], run['fold'], run['steps'])


def _tasks(name):
  """(the run's fields, its command, its model_dir) of each of the table's
  runs: each fold's and candidate's, then all rows' (fold None)."""
  directory = os.path.join(FLAGS.work_dir, name)
  train, test, spec_path, _, _ = real_tables.write_inferred(name, directory)
  rows = real_tables.split(name)[0]
  parts = []
  for fold, mask in enumerate(fold_masks(len(rows), FLAGS.folds,
                                         FLAGS.run_seed)):
    paths = [os.path.join(directory, f'fold{fold}-seed{FLAGS.run_seed}-'
                          f'{part}.csv') for part in ('train', 'held_out')]
    rows[~mask].to_csv(paths[0], index=False)
    rows[mask].to_csv(paths[1], index=False)
    parts.append((fold, *paths, int(mask.sum())))
  parts.append((None, train, test, None))
  for fold, train_files, eval_files, held_out in parts:
    for steps in map(int, FLAGS.lengths):
      model_dir = os.path.join(
          directory, f'{FLAGS.deep_model}-seed{FLAGS.run_seed}-'
          f'{"all" if fold is None else f"fold{fold}"}-{steps}')
      command = real_tables.run_command(
          train_files, eval_files, spec_path, FLAGS.deep_model,
          FLAGS.deep_engine, model_dir, f'--train_steps={steps}',
          f'--seed={FLAGS.run_seed}')
      yield ({'table': name, 'model': FLAGS.deep_model,
              'seed': FLAGS.run_seed, 'fold': fold, 'steps': steps,
              'held_out': held_out}, command, model_dir)


def _finish(fields, process, model_dir, log):
  _, stderr = process.communicate()
  if process.returncode:
    sys.exit(f'error: {model_dir}: {stderr.strip().splitlines()[-1:]}')
  with open(layout.metrics_file(model_dir)) as f:
    metrics = json.load(f)
  table = real_tables.TABLES[fields['table']]
  log(dict(fields, loss=metrics['average_loss'],
           score=metrics[real_tables.score_name(table.head)]))
  subprocess.run(['rm', '-rf', model_dir], check=True)


def main(argv):
  del argv
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  path = os.path.join(FLAGS.work_dir, 'runs.jsonl')
  done = set()
  if os.path.exists(path):
    with open(path) as f:
      done = {_key(json.loads(line)) for line in f}

  def log(run):
    with open(path, 'a') as f:
      f.write(json.dumps(run) + '\n')
    print(json.dumps(run), flush=True)

  running = []
  for name in [] if FLAGS.report_only else FLAGS.tables:
    for fields, command, model_dir in _tasks(name):
      if _key(fields) in done:
        continue
      if len(running) == FLAGS.jobs:
        _finish(*running.pop(0), log)
      subprocess.run(['rm', '-rf', model_dir], check=True)
      running.append((fields, subprocess.Popen(
          command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
          text=True), model_dir))
  for run in running:
    _finish(*run, log)
  _report(path)


def chosen(runs):
  """{(table, model, seed): (lowest, one_se, {steps: mean loss})} over the
  tables whose candidates all ran on the same folds, by the package's rule
  (length_choice.choices): `lowest` the candidate of the lowest mean
  held-out loss, `one_se` the shortest within one standard error of it."""
  losses = {}
  for run in runs:
    if run['fold'] is not None:
      losses.setdefault((run['table'], run['model'], run['seed']),
                        {}).setdefault(run['steps'], {})[run['fold']] = (
                            run['loss'])
  result = {}
  for key, of in losses.items():
    folds = sorted(next(iter(of.values())))
    if len(folds) < 2 or any(sorted(by) != folds for by in of.values()):
      continue
    result[key] = length_choice.choices(
        {steps: [by[fold] for fold in folds] for steps, by in of.items()})
  return result


def _report(path):
  """Per table, model and seed: each candidate's all-rows run's
  evaluation score (a classifier's log loss over LogisticRegression's) and
  mean held-out loss, the lowest marked *, the one-standard-error rule's
  choice +, and whether each choice meets issue 72's bar."""
  with open(path) as f:
    runs = [json.loads(line) for line in f]
  lengths = sorted({run['steps'] for run in runs})
  print('| table (metric), model, seed | LogisticRegression / Ridge | '
        + ' | '.join(f'{steps:,} steps' for steps in lengths)
        + ' | lowest (*) meets | one-SE (+) meets |')
  print('|---' * (len(lengths) + 4) + '|')
  for key, (lowest, one_se, means) in chosen(runs).items():
    name = key[0]
    base = real_tables.baselines(name)
    final = {run['steps']: run for run in runs
             if (run['table'], run['model'], run['seed']) == key and
             run['fold'] is None}
    cells = []
    for steps in lengths:
      cell = f'[{means[steps]:.4g}]' if steps in means else ''
      if steps in final:
        cell = _score(final[steps], base) + ' ' + cell
      cells.append(cell + ('*' if steps == lowest else '') +
                   ('+' if steps == one_se else ''))
    meets = [('yes' if real_tables.meets_bar(
        final[pick]['score'], final[pick]['loss'], base['linear'],
        base['linear_log_loss']) else 'no') if pick in final else ''
             for pick in (lowest, one_se)]
    metric = real_tables.score_name(real_tables.TABLES[name].head)
    print(f'| {name} ({metric}), {key[1]}, {key[2]} | {base["linear"]:.4g}'
          + (f' ({base["linear_log_loss"]:.4g})'
             if base['linear_log_loss'] is not None else '')
          + ' | ' + ' | '.join(cells + meets) + ' |')


def _score(run, base):
  text = f'{run["score"]:.4g}'
  if base['linear_log_loss'] is not None:
    text += f' ({run["loss"] / base["linear_log_loss"] - 1:+.1%})'
  return text


if __name__ == '__main__':
  _define_flags()
  flags.mark_flag_as_required('work_dir')
  app.run(main)
