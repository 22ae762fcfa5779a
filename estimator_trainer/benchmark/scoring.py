"""Batch scoring against `--mode=predict` in one run (issue 74, item 3):
the same census-like rows scored by one model's export, each command in
its own process, its wall time (start-up included, as a user waits for
it), rows/s, CPU seconds (its processes' together) and peak RSS (of its
largest process, Beam's workers included), at one or more sizes:

    python -m estimator_trainer.benchmark.scoring --work_dir=/tmp/scoring \\
        --rows=100000,400000 [--formats=csv,tfrecord] [--train_steps=200]

The model: the package's DNN trained --train_steps on 20,000 census-like
rows (benchmark/census.py, 5 % missing cells) by the estimator engine,
exported; each size's rows are a census-like training split of that
many rows in 4 files. The commands: `run --mode=predict` (the rows as
--eval_files, --num_predictions all of them); `beam_scoring` on
DirectRunner in this machine's one process; and in 2 worker processes.
Each output's line count is checked against the rows.
"""

import argparse
import glob
import os
import resource
import subprocess
import sys
import time

from estimator_trainer.benchmark import census
from estimator_trainer.benchmark import measure
from estimator_trainer.benchmark import runs

_TRAIN_ROWS = 20_000
_SHARDS = 4
_TIMEOUT = 3600


def _cpu_seconds():
  """CPU seconds of this process's waited-for children and theirs."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _run(command, what):
  """(wall seconds, CPU seconds, peak RSS GB) of `command` (CPU: its and
  its processes': on a shared machine the wall time is the load's too);
  exits on its failure."""
  start, cpu = time.perf_counter(), _cpu_seconds()
  proc = subprocess.Popen([sys.executable, *command], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  # The output read after: the runs print little.
  code, peak = runs.wait_with_rusage(proc, _TIMEOUT)
  wall = time.perf_counter() - start
  if code:
    sys.exit(f'{what} failed (exit {code}): {proc.stderr.read()[-3000:]}')
  return wall, _cpu_seconds() - cpu, peak / 2**30


def _write(data_dir, rows, num_shards):
  """A census-like set written once, in a process of its own: written
  here, its memory would be every later run's peak RSS
  (runs.wait_with_rusage)."""
  if not os.path.exists(os.path.join(data_dir, census.FEATURE_SPEC_FILE)):
    _run(['-c', 'from estimator_trainer.benchmark import census; '
          f'census.write({data_dir!r}, {rows}, num_shards={num_shards}, '
          'missing=0.05)'], 'writing the rows')


def _model(work_dir, train_steps):
  """A model_dir trained and exported once: its training flags."""
  data_dir = os.path.join(work_dir, 'train_data')
  _write(data_dir, _TRAIN_ROWS, 2)
  flags = [f'--train_files={census.files(data_dir, "train", "csv")}',
           f'--feature_spec={os.path.join(data_dir, census.FEATURE_SPEC_FILE)}']
  model_dir = os.path.join(work_dir, 'model')
  if not glob.glob(os.path.join(model_dir, 'export', 'final', '*')):
    _run(['-m', 'estimator_trainer.run', f'--model_dir={model_dir}',
          *flags, f'--eval_files={census.files(data_dir, "test", "csv")}',
          '--engine=estimator', '--model=dnn', f'--train_steps={train_steps}',
          '--export=final'], 'training')
  return model_dir, flags


def _lines(pattern):
  count = 0
  for path in glob.glob(pattern):
    with open(path, 'rb') as f:
      count += sum(1 for _ in f)
  return count


def _commands(model_dir, flags, files, rows, out_dir):
  """(name, command, its output files' glob) of each scoring."""
  predictions = os.path.join(out_dir, 'predictions.jsonl')
  beam = ['-m', 'estimator_trainer.tabular.beam_scoring',
          f'--model_dir={model_dir}', f'--input={files}']
  return [
      ('--mode=predict', ['-m', 'estimator_trainer.run', '--mode=predict',
                          f'--model_dir={model_dir}', *flags,
                          f'--eval_files={files}', f'--num_predictions={rows}',
                          f'--predictions_file={predictions}'], predictions),
      ('beam 1 process', [*beam, f'--output={out_dir}/one/part'],
       f'{out_dir}/one/part-*.jsonl'),
      ('beam 2 workers', [*beam, f'--output={out_dir}/two/part', '--',
                          '--direct_num_workers=2',
                          '--direct_running_mode=multi_processing'],
       f'{out_dir}/two/part-*.jsonl')]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--work_dir', required=True)
  parser.add_argument('--rows', default='100000,400000')
  parser.add_argument('--formats', default='csv')
  parser.add_argument('--train_steps', type=int, default=200)
  args = parser.parse_args(argv)
  model_dir, flags = _model(args.work_dir, args.train_steps)
  print(measure.machine())
  print(f'{"command":16} {"format":8} {"rows":>9} {"wall s":>8} '
        f'{"rows/s":>8} {"CPU s":>7} {"rows/CPU-s":>10} {"peak RSS GB":>11}',
        flush=True)
  for rows in (int(r) for r in args.rows.split(',')):
    data_dir = os.path.join(args.work_dir, f'rows{rows}')
    _write(data_dir, rows, _SHARDS)
    for file_format in args.formats.split(','):
      files = census.files(data_dir, 'train', file_format)
      out_dir = os.path.join(args.work_dir, f'out{rows}{file_format}')
      for name, command, written in _commands(model_dir, flags, files, rows,
                                              out_dir):
        wall, cpu, peak = _run(command, name)
        if _lines(written) != rows:
          sys.exit(f'{name}: {_lines(written)} lines for {rows} rows')
        print(f'{name:16} {file_format:8} {rows:>9,} {wall:>8.1f} '
              f'{rows / wall:>8,.0f} {cpu:>7.1f} {rows / cpu:>10,.0f} '
              f'{peak:>11.2f}', flush=True)


if __name__ == '__main__':
  main()
