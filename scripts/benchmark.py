#!/usr/bin/env python3
"""Training throughput and peak memory of every engine, in one run.

    python scripts/benchmark.py --steps=1000 --rounds=3
    python scripts/benchmark.py --configs=estimator_default,fit_default \\
        --steps=600 --rounds=5
    python scripts/benchmark.py --configs=ctl_default,keras_default \\
        --pythons=.venv/bin/python,.venv-tf221/bin/python --rounds=3
    python scripts/benchmark.py --workload=census --census_rows=200000 \\
        --batch_size=256 --steps=2000 --rounds=3

Each configuration runs in its own subprocess on the same machine, data
(the package's TRAIN input pipeline) and model (`models.cnn`):

  estimator_<strategy>  `python -m estimator_trainer.run --mode=train`;
  ctl_<strategy>        examples/s from its `examples_per_second` events,
  keras_<strategy>      with --engine=estimator, ctl or keras.
  fit_<strategy>        the reference users would pick instead: tf.keras
                        `compile` + `fit` (Adam, same loss), fed the package's
                        TRAIN dataset, timed by a batch callback.
  estimator_plain       the Estimator its users write: `tf.estimator.Estimator`
                        on a model_fn of the same model (Adam's `minimize`),
                        the package's input_fn, RunConfig's defaults, timed by
                        a hook (TensorFlow 2.15).
  input_pipeline        the package's TRAIN dataset iterated eagerly, no model.
  model_step            the ceiling of any engine: forward, backward and Adam
                        of the CNN in one tf.function looping over
                        --summary_steps steps of ONE batch already in memory.

--workload=census: tabular data (issue 34), the census-like set of
`estimator_trainer.benchmark.census` (generated into the work dir, or read
from --census_dir), an MLP 128-64, --optimizer at --learning_rate, and:

  canned_dnn            tf.estimator.DNNClassifier on the equivalent
                        feature columns (TensorFlow 2.15), timed by a hook;
  fit_tabular           plain Keras: preprocessing layers in tf.data,
                        Model.fit, timed by a batch callback;
  fit_package_dnn       the same with the package's --model=dnn
                        (models.tabular.dnn) for the plain model;
  estimator_default,    the package's engines: --model=dnn --feature_spec=
  ctl_default, ...      <the set's> --mode=train_and_evaluate;
  tabular_input         the engines' TRAIN input_fn alone (read, shuffle,
                        parse, encode), reduced in the graph, no model;
  tabular_read,         the same input_fn cut after batching the records,
  tabular_parse         or after parsing them; tabular_encode the Encoder
                        alone on one parsed batch (the time by stage);
  tabular_step          the engines' model and optimizer on ONE encoded
                        batch in memory, --summary_steps steps per
                        tf.function call: the ceiling of any engine.

--workload=census_wide_deep: the same set, --model=wide_deep with an
optimizer per part (--optimizer for the deep part, FTRL at 0.2 for the
wide part, canned DNNLinearCombined's defaults):

  canned_wide_deep      tf.estimator.DNNLinearCombinedClassifier, the
                        linear part on the categorical columns, the DNN
                        part as canned_dnn's (TensorFlow 2.15);
  estimator_default,    the package's engines: --model=wide_deep
  ctl_default,          --linear_optimizer=ftrl.
  keras_default

Every row also gets accuracy and AUC on the test split after training
(not timed); "vs canned" and "vs keras" replace "vs step" and "vs fit",
and the target lines check issue 34's: every engine >= 1.0x the canned row and
>= 0.95x fit_tabular.

examples/s is the median over intervals of --summary_steps steps, leaving
out the first step (graph tracing) and the first interval (warm-up); with
--rounds > 1 every configuration runs once per round, interleaved, and the
table shows the median of the rounds (and their range): the machine's speed
drifts between runs, so only rows of one table compare. "vs step" is a
row's examples/s over model_step's, "vs fit" over Model.fit's, each the
median over rounds of the two runs of one round (pairs cancel the drift
between rounds); the target
lines check every engine against model_step (>= 0.95x) and the estimator
engine against estimator_plain (>= 1.0x). Peak RSS is the
subprocess's own maximum resident set (wait4's ru_maxrss). GFLOP/s counts
training as 3x the forward pass, 2 FLOP per multiply-add
(`measure.forward_macs`). A configuration that fails gets a row with its
one-line error instead of numbers. The measuring is in
`estimator_trainer.benchmark`; this script parses flags and prints.
Exit codes: 0 every configuration ran, 1 one failed, 2 usage error.
"""

import json
import os
import shutil
import sys
import tempfile

# Before TensorFlow loads in the subprocesses: its C++ start-up chatter would
# bury the table.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags

from estimator_trainer import errors
from estimator_trainer.benchmark import measure
from estimator_trainer.benchmark import report
from estimator_trainer.benchmark import runs as runs_lib

FLAGS = flags.FLAGS

flags.DEFINE_integer('steps', 1000, 'Training steps per configuration run.')
flags.DEFINE_integer(
    'rounds', 1, 'Runs of every configuration, interleaved; the table shows '
    'the median.')
flags.DEFINE_list('configs', None,
                  f'Configurations to run, of: '
                  f'{", ".join(runs_lib.CONFIGS)} (default: every one of '
                  '--workload\'s).')
flags.DEFINE_integer('batch_size', 64, 'Batch size per replica.')
flags.DEFINE_integer('cpu_replicas', 0,
                     'CLI --cpu_replicas (mirrored on CPU logical devices).')
flags.DEFINE_integer(
    'summary_steps', 50, 'Steps per timed interval (the CLI\'s '
    '--save_summary_steps).')
flags.DEFINE_list('cli_flags', [],
                  'Extra flags for the engines\' configurations, e.g. '
                  '--cli_flags=--save_checkpoints_steps=100000.')
flags.DEFINE_string('work_dir', None,
                    'Where model_dirs go (default: a temporary directory, '
                    'deleted at the end).')
flags.DEFINE_integer('timeout_secs', 1800, 'Limit of one subprocess.')
flags.DEFINE_string('json_output', None,
                    'Also write every run\'s result to this JSON file.')
flags.DEFINE_list(
    'pythons', [],
    'Interpreters (stacks) to run every configuration with, interleaved, e.g. '
    '.venv/bin/python,.venv-tf221/bin/python: rows then name their '
    'TensorFlow version (default: this interpreter).')
flags.DEFINE_multi_string(
    'variant', [],
    'NAME:FLAGS, e.g. "spl10:--steps_per_loop=10": the engines\' '
    'configurations run once per variant, with these CLI flags '
    '(space-separated) added; rows are named config[NAME]. Levers measured '
    'A/B in one run.')
flags.DEFINE_enum('workload', 'image', list(runs_lib.WORKLOADS),
                  'image: the package\'s image data and --model; census: '
                  'the tabular peers on the census-like set.')
flags.DEFINE_string('census_dir', None,
                    '--workload=census: a directory written by '
                    'scripts/make_census_like.py (default: generate one '
                    'of --census_rows rows in the work dir).')
flags.DEFINE_enum('census_format', 'tfrecord', ['tfrecord', 'csv'],
                  '--workload=census: the package\'s files (peers: TFRecords).')
flags.DEFINE_integer('census_rows', 200_000,
                     '--workload=census: training rows to generate.')
flags.DEFINE_enum('optimizer', 'adam', ['adam', 'adagrad'],
                  '--workload=census: the optimizer of every configuration: '
                  'the package\'s default, or the canned DNNClassifier\'s.')
flags.DEFINE_float('learning_rate', 2e-3,
                   '--workload=census: the learning rate, for all (the '
                   'canned DNNClassifier\'s Adagrad default: 0.05).')
flags.DEFINE_string('model', 'cnn', 'The --model every configuration trains.')
flags.DEFINE_enum('precision', 'float32',
                  ['float32', 'mixed_bfloat16', 'mixed_float16'],
                  'The --precision of every configuration (mixed_float16: '
                  'for GPUs; the engines and fit scale the loss, the plain '
                  'Estimator and model_step do not, as plain code would '
                  'not).')
flags.DEFINE_list(
    'synthetic_shape', None,
    'H,W,C: train on random images of this shape (10 classes, TFRecords '
    'written to the work dir) instead of the package\'s default data, e.g. '
    '32,32,3 for resnet20 at CIFAR\'s shape. Throughput does not depend on '
    'pixel values.')


def _synthetic_data(work_dir, shape):
  """TFRecords of random images of `shape`: the setup values reading them."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from estimator_trainer import examples  # pylint: disable=g-import-not-at-top
  from estimator_trainer import sources  # pylint: disable=g-import-not-at-top
  import write_tfrecords  # pylint: disable=g-import-not-at-top

  class Random:
    spec = sources.DatasetSpec('synthetic', shape, 10)

    def dataset(self, split):
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      count = 4096 if split == sources.TRAIN else 256
      rng = np.random.default_rng(0)
      return tf.data.Dataset.from_tensor_slices(
          (rng.integers(0, 256, (count, *shape), np.uint8),
           rng.integers(0, 10, count)))

  directory = os.path.join(work_dir, 'synthetic_data')
  write_tfrecords.write(Random(), directory, 4,
                        examples.ExampleFormat(tuple(shape), 10))
  return {'train_files': os.path.join(directory, 'train-*'),
          'eval_files': os.path.join(directory, 'test-*')}


def _census_data(work_dir):
  """The census-like set (--census_dir, or written to the work dir), its
  schema and the MLP's widths (their module imports TensorFlow, too)."""
  from estimator_trainer.benchmark import census  # pylint: disable=g-import-not-at-top
  from estimator_trainer.models import tabular as tabular_models  # pylint: disable=g-import-not-at-top
  directory = FLAGS.census_dir or os.path.join(work_dir, 'census_data')
  schema = (census.read_schema(directory) if FLAGS.census_dir else
            census.write(directory, FLAGS.census_rows))
  return directory, schema, tabular_models.HIDDEN_UNITS


def _run_in_subprocess(function, *args):
  """`function(*args)` in a forked child; its (picklable) result."""
  import multiprocessing  # pylint: disable=g-import-not-at-top
  with multiprocessing.get_context('fork').Pool(1) as pool:
    return pool.apply(function, args)


def _print_run(run):
  print(report.progress_line(run, FLAGS.rounds), file=sys.stderr, flush=True)


def main(argv):
  if len(argv) > 1:
    errors.fail(2, f'unexpected arguments: {" ".join(argv[1:])}')
  configs = FLAGS.configs or list(runs_lib.WORKLOADS[FLAGS.workload])
  census = FLAGS.workload in runs_lib.TABULAR_WORKLOADS
  error = runs_lib.configs_error(configs, FLAGS.workload, FLAGS.census_format)
  if error:
    errors.fail(2, error)
  if census and (FLAGS.synthetic_shape or FLAGS['model'].present or
                 FLAGS.precision != 'float32'):
    errors.fail(2, f'--workload={FLAGS.workload} trains its own model on its '
                'own data in float32: no --model, --synthetic_shape or '
                '--precision')
  for name in ('steps', 'rounds', 'batch_size', 'summary_steps'):
    if FLAGS[name].value < 1:
      errors.fail(2, f'--{name} must be >= 1')
  variants = {}
  for text in FLAGS.variant:
    name, _, cli_flags = text.partition(':')
    if not name or name in variants:
      errors.fail(2, f'--variant {text!r}: give NAME:FLAGS, each NAME once')
    variants[name] = tuple(cli_flags.split())
  shape = None
  if FLAGS.synthetic_shape:
    try:
      shape = tuple(int(d) for d in FLAGS.synthetic_shape)
    except ValueError:
      shape = ()
    if len(shape) != 3 or min(shape) < 1:
      errors.fail(2, '--synthetic_shape must be 3 positive integers')
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix='benchmark_')
  os.makedirs(work_dir, exist_ok=True)
  try:
    setup = {'model': FLAGS.model, 'precision': FLAGS.precision}
    if shape:
      # In a subprocess: this process must not load TensorFlow (RSS).
      setup.update(_run_in_subprocess(_synthetic_data, work_dir, shape))
    if census:
      census_dir, schema, widths = _run_in_subprocess(_census_data, work_dir)
      setup = runs_lib.census_setup(
          census_dir, FLAGS.optimizer, FLAGS.learning_rate,
          wide_deep=FLAGS.workload == 'census_wide_deep',
          file_format=FLAGS.census_format)
    settings = runs_lib.Settings(
        steps=FLAGS.steps, batch_size=FLAGS.batch_size,
        summary_steps=FLAGS.summary_steps, cpu_replicas=FLAGS.cpu_replicas,
        cli_flags=tuple(FLAGS.cli_flags), timeout_secs=FLAGS.timeout_secs,
        setup=setup, mode='train_and_evaluate' if census else 'train')
    runs = runs_lib.run_rounds(configs, FLAGS.rounds, work_dir,
                               settings, report=_print_run,
                               pythons=FLAGS.pythons,
                               variants=variants or None)
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)
  if census:
    flop_per_example = None
    rows = report.summarize(runs)
    print(report.census_title(schema, FLAGS.census_format, widths,
                              FLAGS.optimizer, FLAGS.learning_rate, settings,
                              FLAGS.rounds))
  else:
    # Imports TensorFlow: only after the last run (see wait_with_rusage).
    flop_per_example = measure.train_flop_per_example(
        FLAGS.model, shape or (28, 28, 1))
    rows = report.summarize(runs, flop_per_example)
    print(report.image_title(FLAGS.model, FLAGS.precision, shape,
                             flop_per_example, settings, FLAGS.rounds))
  print(report.format_table(rows))
  for line in report.target_lines(rows):
    print(line)
  if FLAGS.json_output:
    from estimator_trainer.outputs import write_atomic
    write_atomic(FLAGS.json_output, json.dumps(
        {'runs': runs, 'rows': rows, 'flop_per_example': flop_per_example},
        indent=1))
  if any('error' in run for run in runs):
    sys.exit(1)


if __name__ == '__main__':
  app.run(main, flags_parser=errors.parse_flags)
