#!/usr/bin/env python3
"""Training throughput and peak memory of every engine, in one run.

    python scripts/benchmark.py --steps=1000 --rounds=3
    python scripts/benchmark.py --configs=estimator_default,fit_default \\
        --steps=600 --rounds=5

Each configuration runs in its own subprocess on the same machine, data
(the package's TRAIN input pipeline) and model (`create_model`):

  estimator_<strategy>  `python -m estimator_trainer.run --mode=train`;
                        examples/s from its `examples_per_second` events.
  ctl_<strategy>        the same CLI with `--engine=ctl`.
  fit_<strategy>        the reference users would pick instead: tf.keras
                        `compile` + `fit` (Adam, same loss), fed the package's
                        TRAIN dataset (input_fn's, images unpacked from the
                        features dict), timed by a batch callback.
  input_pipeline        the package's TRAIN dataset iterated eagerly, no model.
  model_step            the ceiling of any engine: forward, backward and Adam
                        of create_model in one tf.function looping over
                        --summary_steps steps of ONE batch already in memory
                        (no input pipeline, no framework, one sync per
                        interval).

examples/s is the median over intervals of --summary_steps steps, leaving
out the first step (graph tracing) and the first interval (warm-up); with
--rounds > 1 every configuration runs once per round, interleaved, and the
table shows the median of the rounds (and their range): the machine's speed
drifts between runs, so only rows of one table compare. Peak RSS is the
subprocess's own maximum resident set (wait4's ru_maxrss). GFLOP/s counts
training as 3x the forward pass, 2 FLOP per multiply-add (see
`forward_macs`). A configuration that fails (e.g. a flag the CLI does not
have yet) gets a row with its one-line error instead of numbers.
Exit codes: 0 every configuration ran, 1 one failed, 2 usage error.
"""

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# Before TensorFlow loads: its C++ start-up chatter would bury the table.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags

from estimator_trainer import layout

FLAGS = flags.FLAGS

# name -> (kind, strategy). The strategy is passed as --strategy to the CLI
# and used by the Model.fit reference; `input_pipeline` has none.
CONFIGS = {
    'estimator_default': ('estimator', 'default'),
    'estimator_mirrored': ('estimator', 'mirrored'),
    'ctl_default': ('ctl', 'default'),
    'ctl_mirrored': ('ctl', 'mirrored'),
    'fit_default': ('fit', 'default'),
    'fit_mirrored': ('fit', 'mirrored'),
    'input_pipeline': ('input', None),
    'model_step': ('step', 'default'),
}
# A worker subprocess prints its result on a line starting with this.
RESULT_PREFIX = 'BENCHMARK_RESULT '
# Training costs about 3 forward passes (forward, gradients of activations
# and of weights); a multiply-add is 2 FLOP.
TRAIN_FLOP_PER_MAC = 2 * 3


def _define_flags():
  """Only when run as a script: tests import the functions."""
  flags.DEFINE_integer('steps', 1000, 'Training steps per configuration run.')
  flags.DEFINE_integer(
      'rounds', 1, 'Runs of every configuration, interleaved; the table shows '
      'the median.')
  flags.DEFINE_list('configs', list(CONFIGS),
                    f'Configurations to run, of: {", ".join(CONFIGS)}.')
  flags.DEFINE_integer('batch_size', 64, 'Batch size per replica.')
  flags.DEFINE_integer('cpu_replicas', 0,
                       'CLI --cpu_replicas (mirrored on CPU logical devices).')
  flags.DEFINE_integer(
      'summary_steps', 50, 'Steps per timed interval (the CLI\'s '
      '--save_summary_steps).')
  flags.DEFINE_list('cli_flags', [],
                    'Extra flags for the CLI configurations, e.g. '
                    '--cli_flags=--save_checkpoints_steps=100000.')
  flags.DEFINE_string('work_dir', None,
                      'Where model_dirs go (default: a temporary directory, '
                      'deleted at the end).')
  flags.DEFINE_integer('timeout_secs', 1800, 'Limit of one subprocess.')
  flags.DEFINE_string('json_output', None,
                      'Also write every run\'s result to this JSON file.')
  # Internal: what a worker subprocess runs.
  flags.DEFINE_string('worker', None, 'Internal: run one configuration.')


# Measurement.


def steady_rate(rates):
  """Median of interval rates, leaving out the first (warm-up) interval."""
  if len(rates) < 2:
    raise RuntimeError(f'{len(rates)} timed interval(s): too few, raise '
                       '--steps or lower --summary_steps')
  return statistics.median(rates[1:])


class IntervalTimer:
  """Examples/s over every `every_steps` steps after the first step.

  The first step is left out like ExamplesPerSecondHook does: it traces
  and optimizes the graph.
  """

  def __init__(self, batch_size, every_steps):
    self._batch_size = batch_size
    self._every_steps = every_steps
    self._last = None
    self._steps = 0
    self.rates = []

  def step(self):
    now = time.perf_counter()
    if self._last is None:
      self._last = now
      return
    self._steps += 1
    if self._steps == self._every_steps:
      self.rates.append(self._steps * self._batch_size / (now - self._last))
      self._last, self._steps = now, 0


def read_event_rates(model_dir, tag='examples_per_second'):
  """The values of scalar `tag` in model_dir's event files, by step.

  Reads the files without TensorFlow: see `_wait_with_rusage`.
  """
  return [value for _, value in layout.read_scalars(model_dir).get(tag, [])]


def forward_macs(model):
  """Multiply-adds of one example's forward pass through `model`.

  Conv2D: output elements x kernel height x kernel width x input channels;
  Dense: inputs x units. Biases, ReLU and pooling are a few adds or
  comparisons per element and are not counted. For create_model on
  28x28x1 images (valid padding, 2x2 pooling):

    conv1   26*26*32 outputs x 3*3*1        =   194,688
    conv2   11*11*64 outputs x 3*3*32       = 2,230,272
    hidden  (5*5*64 = 1600 inputs) x 64     =   102,400
    logits  64 x 10                         =       640
    total                                   = 2,528,000

  so training costs ~2.528e6 x 2 x 3 = 15.17 MFLOP per example.
  """
  import tensorflow as tf
  macs = 0
  for layer in model.layers:
    if isinstance(layer, tf.keras.layers.Conv2D):
      kernel_h, kernel_w, in_channels, _ = layer.kernel.shape
      outputs = 1
      for dim in layer.output.shape[1:]:
        outputs *= dim
      macs += outputs * kernel_h * kernel_w * in_channels // layer.groups
    elif isinstance(layer, tf.keras.layers.Dense):
      macs += layer.kernel.shape[0] * layer.kernel.shape[1]
  return macs


def train_flop_per_example():
  from estimator_trainer.model import create_model
  return forward_macs(create_model()) * TRAIN_FLOP_PER_MAC


# Workers: one configuration in this (sub)process.


def _package_dataset(batch_size, strategy):
  """The package's TRAIN dataset at this global batch, as Estimator reads it."""
  import tensorflow as tf
  from estimator_trainer import config as config_lib
  from estimator_trainer import data
  from estimator_trainer.strategy import num_replicas
  global_batch = batch_size * num_replicas(strategy)
  # model_dir is not read by input_fn.
  config = config_lib.TrainConfig(model_dir=tempfile.gettempdir(),
                                  cluster=None)
  input_fn = data.make_input_fn(config, global_batch)
  return input_fn(tf.estimator.ModeKeys.TRAIN), global_batch


def run_fit(strategy_name, steps, batch_size, every_steps, cpu_replicas):
  """Model.fit of create_model on the package's data; interval rates."""
  import tensorflow as tf
  from estimator_trainer.model import create_model
  from estimator_trainer.strategy import make_strategy
  strategy = make_strategy(strategy_name, cpu_replicas)
  dataset, global_batch = _package_dataset(batch_size, strategy)
  # Keras feeds a Sequential model a tensor, not the features dict.
  dataset = dataset.map(lambda features, labels: (features['image'], labels))
  timer = IntervalTimer(global_batch, every_steps)
  scope = strategy.scope() if strategy else contextlib.nullcontext()
  with scope:
    model = create_model(seed=42)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(1e-3),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=['accuracy'])
  # A batch-end callback that wants numpy logs makes fit wait for every
  # step, as a session.run per step does.
  callback = tf.keras.callbacks.LambdaCallback(
      on_train_batch_end=lambda batch, logs: timer.step())
  model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[callback],
            verbose=0)
  return timer.rates


def run_input_pipeline(steps, batch_size, every_steps):
  """Iterates the package's TRAIN dataset eagerly; interval rates."""
  dataset, global_batch = _package_dataset(batch_size, None)
  timer = IntervalTimer(global_batch, every_steps)
  for _ in dataset.take(steps):
    timer.step()
  return timer.rates


def run_model_step(steps, batch_size, every_steps):
  """Training steps on one in-memory batch, `every_steps` per call."""
  import tensorflow as tf
  from estimator_trainer.model import create_model
  dataset, global_batch = _package_dataset(batch_size, None)
  features, labels = next(iter(dataset))
  images = features['image']
  model = create_model(seed=42)
  optimizer = tf.keras.optimizers.Adam(1e-3)
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @tf.function
  def train_steps(num_steps):
    loss = tf.constant(0.0)
    for _ in tf.range(num_steps):
      with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(images, training=True))
      gradients = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss

  rates = []
  for _ in range(steps // every_steps):
    start = time.perf_counter()
    train_steps(tf.constant(every_steps)).numpy()
    rates.append(every_steps * global_batch / (time.perf_counter() - start))
  return rates


def _worker_main(name):
  kind, strategy = CONFIGS[name]
  if kind == 'fit':
    rates = run_fit(strategy, FLAGS.steps, FLAGS.batch_size,
                    FLAGS.summary_steps, FLAGS.cpu_replicas)
  elif kind == 'input':
    rates = run_input_pipeline(FLAGS.steps, FLAGS.batch_size,
                               FLAGS.summary_steps)
  elif kind == 'step':
    rates = run_model_step(FLAGS.steps, FLAGS.batch_size, FLAGS.summary_steps)
  else:
    raise ValueError(f'{name} is not a worker configuration')
  print(RESULT_PREFIX + json.dumps({'rates': rates}), flush=True)


# The parent: runs the subprocesses and prints the table.


def _wait_with_rusage(proc, timeout):
  """(returncode, max RSS in bytes) of `proc`; kills it after `timeout` s.

  Linux carries the parent's peak RSS into a child's ru_maxrss across fork
  and exec, so this process must stay small: it never imports TensorFlow
  before the last run.
  """
  timer = threading.Timer(timeout, proc.kill)
  timer.start()
  try:
    _, status, rusage = os.wait4(proc.pid, 0)
  finally:
    timer.cancel()
  proc.returncode = os.waitstatus_to_exitcode(status)
  return proc.returncode, rusage.ru_maxrss * 1024  # Linux: kilobytes.


def _error_line(stderr, returncode):
  """The one line that says why a run failed."""
  lines = [line.strip() for line in stderr.splitlines() if line.strip()]
  for line in reversed(lines):
    if line.startswith(('error:', 'FATAL Flags parsing error')):
      return line
  return lines[-1] if lines else f'exit code {returncode}'


def _command(name, model_dir):
  kind, strategy = CONFIGS[name]
  if kind in ('estimator', 'ctl'):
    command = [
        sys.executable, '-m', 'estimator_trainer.run', '--mode=train',
        f'--model_dir={model_dir}', f'--strategy={strategy}',
        f'--train_steps={FLAGS.steps}',
        f'--save_summary_steps={FLAGS.summary_steps}',
        f'--batch_size_per_replica={FLAGS.batch_size}',
        f'--cpu_replicas={FLAGS.cpu_replicas}',
    ]
    if kind == 'ctl':
      command.append('--engine=ctl')
    return command + FLAGS.cli_flags
  return [
      sys.executable, os.path.abspath(__file__), f'--worker={name}',
      f'--steps={FLAGS.steps}', f'--batch_size={FLAGS.batch_size}',
      f'--summary_steps={FLAGS.summary_steps}',
      f'--cpu_replicas={FLAGS.cpu_replicas}',
  ]


def run_config(name, work_dir):
  """One run of configuration `name` in a subprocess: a result dict."""
  model_dir = tempfile.mkdtemp(prefix=f'{name}_', dir=work_dir)
  result = {'config': name}
  start = time.monotonic()
  with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile(
      'w+') as err:
    proc = subprocess.Popen(_command(name, model_dir), stdout=out,
                            stderr=err, stdin=subprocess.DEVNULL, text=True)
    returncode, max_rss = _wait_with_rusage(proc, FLAGS.timeout_secs)
    out.seek(0)
    err.seek(0)
    stdout, stderr = out.read(), err.read()
  result['seconds'] = time.monotonic() - start
  result['peak_rss_mb'] = max_rss / 2**20
  try:
    if returncode:
      raise RuntimeError(_error_line(stderr, returncode))
    if CONFIGS[name][0] in ('estimator', 'ctl'):
      rates = read_event_rates(model_dir)
    else:
      lines = [line for line in stdout.splitlines()
               if line.startswith(RESULT_PREFIX)]
      if not lines:
        raise RuntimeError(_error_line(stderr, returncode))
      rates = json.loads(lines[-1][len(RESULT_PREFIX):])['rates']
    result['rates'] = rates
    result['examples_per_second'] = steady_rate(rates)
  except RuntimeError as e:
    result['error'] = str(e)
  shutil.rmtree(model_dir, ignore_errors=True)
  return result


def summarize(runs, flop_per_example):
  """One row per configuration from the runs of every round."""
  rows = {}
  for name in dict.fromkeys(run['config'] for run in runs):
    mine = [run for run in runs if run['config'] == name]
    good = [run['examples_per_second'] for run in mine
            if 'examples_per_second' in run]
    row = {'config': name,
           'peak_rss_mb': max(run['peak_rss_mb'] for run in mine)}
    if good:
      row['examples_per_second'] = statistics.median(good)
      row['range'] = (min(good), max(good))
      if CONFIGS[name][0] != 'input':
        row['gflops'] = row['examples_per_second'] * flop_per_example / 1e9
    errors = [run['error'] for run in mine if 'error' in run]
    if errors:
      row['error'] = errors[0]
      row['failed_runs'] = len(errors)
    rows[name] = row
  for row in rows.values():
    # Against Model.fit under the same strategy, else without one.
    strategy = CONFIGS[row['config']][1]
    reference = rows.get(f'fit_{strategy}') or rows.get('fit_default')
    if reference and 'examples_per_second' in row and (
        'examples_per_second' in reference):
      row['ratio'] = (row['examples_per_second'] /
                      reference['examples_per_second'])
  return list(rows.values())


def format_table(rows):
  """The table as text: one line per configuration."""
  header = (f'{"configuration":<20} {"examples/s":>11} {"range":>15} '
            f'{"vs fit":>7} {"peak RSS MB":>11} {"GFLOP/s":>8}')
  lines = [header, '-' * len(header)]
  for row in rows:
    rss = f'{row["peak_rss_mb"]:>11.0f}'
    if 'examples_per_second' not in row:
      lines.append(f'{row["config"]:<20} {"failed":>11} {"":>15} {"":>7} '
                   f'{rss} {"":>8}  {row["error"]}')
      continue
    low, high = row['range']
    ratio = f'{row["ratio"]:.2f}x' if 'ratio' in row else '-'
    gflops = f'{row["gflops"]:.1f}' if 'gflops' in row else '-'
    line = (f'{row["config"]:<20} {row["examples_per_second"]:>11,.0f} '
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
    lines.append(f'target {row["config"]}: {ratio:.2f}x {against} '
                 f'(>= {TARGETS[kind]}x) {verdict}')
  return lines


def _parent_main():
  unknown = [name for name in FLAGS.configs if name not in CONFIGS]
  if unknown:
    print(f'error: unknown --configs {", ".join(unknown)}; choose from '
          f'{", ".join(CONFIGS)}', file=sys.stderr)
    sys.exit(2)
  for name in ('steps', 'rounds', 'batch_size', 'summary_steps'):
    if FLAGS[name].value < 1:
      print(f'error: --{name} must be >= 1', file=sys.stderr)
      sys.exit(2)
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix='benchmark_')
  os.makedirs(work_dir, exist_ok=True)
  runs = []
  try:
    for round_index in range(FLAGS.rounds):
      # Rotated each round, so no configuration always runs first or last
      # as the machine's speed drifts.
      shift = round_index % len(FLAGS.configs)
      for name in FLAGS.configs[shift:] + FLAGS.configs[:shift]:
        run = run_config(name, work_dir)
        run['round'] = round_index
        runs.append(run)
        rate = run.get('examples_per_second')
        print(f'round {round_index + 1}/{FLAGS.rounds} {name}: '
              + (f'failed: {run["error"]}' if 'error' in run else
                 f'{rate:,.0f} examples/s')
              + f', {run["peak_rss_mb"]:.0f} MB, {run["seconds"]:.0f} s',
              file=sys.stderr, flush=True)
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)
  flop_per_example = train_flop_per_example()
  rows = summarize(runs, flop_per_example)
  print(f'{FLAGS.steps} steps x {FLAGS.rounds} round(s), batch '
        f'{FLAGS.batch_size} per replica, intervals of {FLAGS.summary_steps} '
        f'steps; training {flop_per_example / 1e6:.2f} MFLOP/example '
        f'({flop_per_example // TRAIN_FLOP_PER_MAC:,} MACs forward); '
        f'{os.cpu_count()} CPUs')
  print(format_table(rows))
  for line in target_lines(rows):
    print(line)
  if FLAGS.json_output:
    # TensorFlow is loaded by now (train_flop_per_example).
    from estimator_trainer.outputs import write_atomic
    write_atomic(FLAGS.json_output, json.dumps(
        {'runs': runs, 'rows': rows, 'flop_per_example': flop_per_example},
        indent=1))
  if any('error' in run for run in runs):
    sys.exit(1)


def main(argv):
  if len(argv) > 1:
    print(f'error: unexpected arguments: {" ".join(argv[1:])}',
          file=sys.stderr)
    sys.exit(2)
  if FLAGS.worker:
    _worker_main(FLAGS.worker)
  else:
    _parent_main()


if __name__ == '__main__':
  _define_flags()
  app.run(main)
