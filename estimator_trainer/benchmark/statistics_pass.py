"""The tabular statistics pass and `infer` at production size (issue 50):
rows, format, wall time, peak RSS and rows/s, each pass in its own
process, of the package at one or more source trees (before and after a
change, on the same machine):

    python -m estimator_trainer.benchmark.statistics_pass \\
        --data_dir=/work/bigdata/census2m --formats=csv,tfrecord \\
        --passes=statistics,infer --code=before:/path/to/old,after:.

--data_dir is a census-like set (scripts/make_census_like.py). A pass is
`statistics.load_or_compute` into an empty model_dir (what `run` does
before its first step) or `infer.infer` of the training files. With
--unreadable_as_missing the pass reads a cell that is no number as missing
(a set with such a cell takes the Python re-read: its memory is measured).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

_RESULT = 'PASS_RESULT '


def _child(data_dir, file_format, name, unreadable_as_missing):
  """Runs one pass here; prints its result line."""
  # Imported here: the parent picks which tree they come from.
  from estimator_trainer import sources  # pylint: disable=g-import-not-at-top
  from estimator_trainer.benchmark import census  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular import infer  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular import spec as spec_lib  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular import statistics  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular.source import TabularSource  # pylint: disable=g-import-not-at-top
  patterns = {sources.TRAIN: census.files(data_dir, 'train', file_format),
              sources.TEST: census.files(data_dir, 'test', file_format)}
  start = time.perf_counter()
  if name == 'infer':
    infer.infer(patterns[sources.TRAIN], census.LABEL)
    rows = census.read_schema(data_dir)['rows']
  else:
    spec = spec_lib.read(os.path.join(data_dir, census.FEATURE_SPEC_FILE))
    with tempfile.TemporaryDirectory() as model_dir:
      rows = statistics.load_or_compute(
          model_dir, spec, TabularSource(
              patterns, spec,
              unreadable_as_missing=unreadable_as_missing)).num_examples
  wall = time.perf_counter() - start
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
  print(_RESULT + json.dumps({'rows': rows, 'wall_s': wall,
                              'peak_rss_gb': peak}), flush=True)


def _run(code_dir, data_dir, file_format, name, unreadable_as_missing):
  # This file run by path: an older tree may not have it.
  env = dict(os.environ, PYTHONPATH=os.path.abspath(code_dir))
  run_me = f'import runpy; runpy.run_path({__file__!r}, run_name="__main__")'
  out = subprocess.run(
      [sys.executable, '-c', run_me, '--child', f'--data_dir={data_dir}', f'--formats={file_format}',
       f'--passes={name}'] + ['--unreadable_as_missing'] * bool(
           unreadable_as_missing), env=env, stdout=subprocess.PIPE, text=True,
      check=True, cwd=os.path.abspath(code_dir)).stdout
  line = next(line for line in out.splitlines() if line.startswith(_RESULT))
  return json.loads(line[len(_RESULT):])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data_dir', required=True)
  parser.add_argument('--formats', default='csv,tfrecord')
  parser.add_argument('--passes', default='statistics,infer')
  parser.add_argument('--code', default='current:.',
                      help='label:source_tree,... (each its own processes)')
  parser.add_argument('--unreadable_as_missing', action='store_true')
  parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    _child(args.data_dir, args.formats, args.passes,
           args.unreadable_as_missing)
    return
  print(f'{"code":8} {"pass":10} {"format":8} {"rows":>11} {"wall s":>8} '
        f'{"peak RSS GB":>11} {"rows/s":>9}', flush=True)
  for label, code_dir in (item.split(':', 1) for item in
                          args.code.split(',')):
    for name in args.passes.split(','):
      for file_format in args.formats.split(','):
        result = _run(code_dir, args.data_dir, file_format, name,
                      args.unreadable_as_missing)
        print(f'{label:8} {name:10} {file_format:8} {result["rows"]:>11,} '
              f'{result["wall_s"]:>8.1f} {result["peak_rss_gb"]:>11.2f} '
              f'{result["rows"] / result["wall_s"]:>9,.0f}', flush=True)


if __name__ == '__main__':
  main()
