"""The structured-data path against the baselines a data scientist runs
first, on real tables that PyPI packages ship (benchmark/real_tables.py):
per table, `tabular.infer`'s spec and what it chose, then `run` for each
--models x --engines with no tuning (plus --flags), beside scikit-learn's
LogisticRegression / Ridge and HistGradientBoosting on the same 80/20
split. Prints a Markdown table (AUC for binary, accuracy for multiclass,
RMSE for regression; a classifier's log loss beside it). Every model is
scored as the baselines are (benchmark/table_scores.py): scikit-learn on
its --mode=predict lines of the evaluation rows (metrics.json's AUC is
canned's streaming one, which parts from the exact one by up to 0.005 on
these tables; the note says it where it differs); beside its difference
from LogisticRegression/Ridge, that difference's 95 % interval over
resamples of the evaluation rows (a paired bootstrap: one that holds 0 is
a difference those rows do not tell from their draw).

  python scripts/tabular_baselines.py --work_dir=/tmp/baselines \
      [--tables=wine,pima] [--models=linear,dnn,wide_deep] \
      [--engines=estimator] [--flags='--train_epochs=20'] [--split_seed=1] \
      [--reuse_runs]
"""

import json
import os
import shlex
import subprocess
import time

from estimator_trainer import console

if __name__ == '__main__':
  # A command of the docs: TensorFlow's start-up noise hidden, before the
  # imports below load it (its table is what the console is for).
  console.quiet_tensorflow(verbose=False)

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags

from estimator_trainer.benchmark import real_tables
from estimator_trainer.benchmark import table_scores

flags.DEFINE_string('work_dir', None, 'Where the splits, specs and model_dirs '
                    'go.', required=True)
flags.DEFINE_list('tables', list(real_tables.TABLES), 'The tables.')
flags.DEFINE_list('models', ['linear', 'dnn', 'wide_deep'], 'The models.')
flags.DEFINE_list('engines', ['estimator'], 'The engines.')
flags.DEFINE_string('flags', '', 'More flags for every run.')
flags.DEFINE_bool('infer_only', False, 'Print the inferred specs only.')
flags.DEFINE_integer('split_seed', real_tables.SEED, 'The seed of the '
                     'tables\' 80/20 splits: another draws other evaluation '
                     'rows (the published figures are of the default).')
flags.DEFINE_bool('reuse_runs', False, 'Score a model_dir that holds a '
                  'finished run (its metrics.json) as it is instead of '
                  'training it again: an interrupted benchmark goes on.')
FLAGS = flags.FLAGS


def _failed(done):
  lines = done.stderr.strip().splitlines()
  return f'failed: {lines[-1] if lines else done.returncode}'


def _run(name, train, test, spec_path, model, engine, model_dir):
  """(table_scores.Rows, metrics.json, note) of the run into model_dir."""
  start = time.monotonic()
  metrics_path = os.path.join(model_dir, 'metrics.json')
  if FLAGS.reuse_runs and os.path.exists(metrics_path):
    note = 'reused'
  else:
    subprocess.run(['rm', '-rf', model_dir], check=True)
    done = subprocess.run(real_tables.run_command(
        train, test, spec_path, model, engine, model_dir,
        *shlex.split(FLAGS.flags)), capture_output=True, text=True,
                          check=False)
    if done.returncode:
      return None, None, _failed(done)
    note = f'{time.monotonic() - start:.0f} s'
  predictions = os.path.join(model_dir, 'eval_predictions.jsonl')
  done = subprocess.run(real_tables.predict_command(model_dir, test,
                                                    predictions),
                        capture_output=True, text=True, check=False)
  if done.returncode:
    return None, None, f'predict {_failed(done)}'
  with open(predictions) as f:
    lines = [json.loads(line) for line in f]
  with open(metrics_path) as f:
    metrics = json.load(f)
  table = real_tables.TABLES[name]
  return (table_scores.of_predictions(table.label, table.head, test, lines),
          metrics, note)


def main(argv):
  del argv
  rows = []
  for name in FLAGS.tables:
    table = real_tables.TABLES[name]
    directory = os.path.join(FLAGS.work_dir, name)
    train, test, spec_path, spec, lines = real_tables.write_inferred(
        name, directory, FLAGS.split_seed)
    print(f'## {name} ({table.source}; label {table.label}: '
          f'{table.head})', *lines, sep='\n  ', flush=True)
    if FLAGS.infer_only:
      continue
    metric = real_tables.score_name(table.head)
    baseline = real_tables.baselines(name, FLAGS.split_seed)
    for model in FLAGS.models:
      for engine in FLAGS.engines:
        model_dir = os.path.join(directory, f'{model}-{engine}')
        predicted, metrics, note = _run(name, train, test, spec_path, model,
                                        engine, model_dir)
        score = log_loss = interval = None
        if predicted is not None:
          score, log_loss = predicted.score(), predicted.log_loss()
          low, high = table_scores.paired_interval(predicted,
                                                   baseline['linear_rows'])
          interval = (f'{score - baseline["linear"]:+.4f} '
                      f'[{low:+.4f}, {high:+.4f}]')
          if round(metrics[metric], 4) != round(score, 4):
            note += f'; metrics.json {metric} {metrics[metric]:.4f}'
        rows.append((name, spec.head, model, engine, metric, score,
                     baseline['linear'], interval, baseline['boosting'],
                     log_loss, baseline['linear_log_loss'], note))
        print(' | '.join(map(str, rows[-1])), flush=True)
  if rows:
    print('\n| table | head | model | engine | metric | score | '
          'LogisticRegression/Ridge | score - LogisticRegression/Ridge '
          '[95 % interval] | HistGradientBoosting | log loss | '
          'LogisticRegression log loss | note |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for row in rows:
      print('| ' + ' | '.join(f'{v:.4f}' if isinstance(v, float) else str(v)
                              for v in row) + ' |')


if __name__ == '__main__':
  app.run(main)
