"""Benchmark configurations, each run in its own subprocess: the package's
engines through its CLI, the reference workloads through `workloads`."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Mapping, Sequence

from estimator_trainer import layout
from estimator_trainer.benchmark import measure
from estimator_trainer.benchmark.workloads import RESULT_PREFIX

# name -> (kind, strategy). Engines (estimator, ctl, keras) run the CLI with
# --engine=<kind> --strategy=<strategy>; fit, plain_estimator (TensorFlow
# 2.15 only), input and step run a workload; canned_dnn and
# canned_wide_deep (2.15 only),
# fit_tabular and fit_package_dnn the tabular peers (`tabular`), and
# tabular_input (tabular_read and tabular_parse: it cut short),
# tabular_encode and tabular_step the engines' parts alone
# (`tabular_parts`), on the census-like set.
CONFIGS = {
    'estimator_default': ('estimator', 'default'),
    'estimator_mirrored': ('estimator', 'mirrored'),
    'ctl_default': ('ctl', 'default'),
    'ctl_mirrored': ('ctl', 'mirrored'),
    'keras_default': ('keras', 'default'),
    'keras_mirrored': ('keras', 'mirrored'),
    'fit_default': ('fit', 'default'),
    'fit_mirrored': ('fit', 'mirrored'),
    'estimator_plain': ('plain_estimator', 'default'),
    'input_pipeline': ('input', None),
    'model_step': ('step', 'default'),
    'canned_dnn': ('canned_dnn', 'default'),
    'canned_wide_deep': ('canned_wide_deep', 'default'),
    'fit_tabular': ('fit_tabular', 'default'),
    'fit_package_dnn': ('fit_package_dnn', 'default'),
    'tabular_input': ('tabular_input', None),
    'tabular_read': ('tabular_read', None),
    'tabular_parse': ('tabular_parse', None),
    'tabular_encode': ('tabular_encode', None),
    'tabular_step': ('tabular_step', 'default'),
}
ENGINES = ('estimator', 'ctl', 'keras')
TABULAR_CONFIGS = ('canned_dnn', 'canned_wide_deep', 'fit_tabular',
                   'fit_package_dnn', 'tabular_read', 'tabular_parse',
                   'tabular_input', 'tabular_encode', 'tabular_step')
# The configurations of each workload (scripts/benchmark.py --workload).
# Census: the package's engines train --model=dnn on it through the CLI
# (`census_setup`: --feature_spec and the files), evaluated on its test
# split (--mode=train_and_evaluate) for accuracy and AUC.
WORKLOADS = {
    'image': tuple(name for name in CONFIGS if name not in TABULAR_CONFIGS),
    'census': ('estimator_default', 'ctl_default', 'keras_default',
               *(name for name in TABULAR_CONFIGS
                 if name != 'canned_wide_deep')),
    # Wide & deep with an optimizer per part (FTRL for the wide part): the
    # canned DNNLinearCombinedClassifier beside the engines.
    'census_wide_deep': ('estimator_default', 'ctl_default',
                         'keras_default', 'canned_wide_deep'),
}
TABULAR_WORKLOADS = ('census', 'census_wide_deep')
# canned DNNLinearCombined's linear learning rate, min(0.2, 1/sqrt(linear
# columns)): 0.2 for the census-like set's 9 categorical columns.
WIDE_LEARNING_RATE = 0.2


@dataclasses.dataclass(frozen=True)
class Settings:
  """What every configuration runs with."""

  steps: int = 1000
  batch_size: int = 64  # Per replica.
  summary_steps: int = 50  # Steps per timed interval.
  cpu_replicas: int = 0
  cli_flags: Sequence[str] = ()  # Extra flags for the engines' CLI.
  timeout_secs: int = 1800
  # TrainConfig values every configuration shares: model, precision, data.
  setup: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  python: str = sys.executable  # The interpreter, and so the stack.
  mode: str = 'train'  # The engines' --mode.


def configs_error(configs, workload, census_format):
  """Why `configs` cannot run in `workload` on the census files of
  `census_format` (None: they can)."""
  unknown = [name for name in configs if name not in CONFIGS]
  if unknown:
    return (f'unknown --configs {", ".join(unknown)}; choose from '
            f'{", ".join(CONFIGS)}')
  census = workload in TABULAR_WORKLOADS
  misplaced = [name for name in configs
               if (name in TABULAR_CONFIGS) != census and
               CONFIGS[name][0] not in ENGINES]
  if misplaced:
    return (f'--configs {", ".join(misplaced)}: not of --workload='
            f'{workload}')
  peers = [name for name in configs if name in TABULAR_CONFIGS
           and not name.startswith('tabular_')]
  if census_format != 'tfrecord' and peers:
    return (f'--census_format={census_format}: --configs '
            f'{", ".join(peers)} read TFRecords only')
  return None


def wait_with_rusage(proc, timeout):
  """(returncode, max RSS in bytes) of `proc`; kills it after `timeout` s.

  Linux carries the parent's peak RSS into a child's ru_maxrss across fork
  and exec, so the parent must stay small: it must not import TensorFlow
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


def command(name, model_dir, settings):
  """The subprocess command line of configuration `name`."""
  kind, strategy = CONFIGS[name]
  if kind in ENGINES:
    return [
        settings.python, '-m', 'estimator_trainer.run',
        f'--mode={settings.mode}',
        f'--engine={kind}', f'--model_dir={model_dir}',
        f'--strategy={strategy}', f'--train_steps={settings.steps}',
        f'--save_summary_steps={settings.summary_steps}',
        f'--batch_size_per_replica={settings.batch_size}',
        f'--cpu_replicas={settings.cpu_replicas}',
        *(f'--{name}={value}' for name, value in settings.setup.items()),
        *settings.cli_flags,
    ]
  return [settings.python, '-m', 'estimator_trainer.benchmark.workloads',
          json.dumps(dict(kind=kind, setup=dict(settings.setup),
                          strategy=strategy, steps=settings.steps,
                          batch_size=settings.batch_size,
                          every_steps=settings.summary_steps,
                          cpu_replicas=settings.cpu_replicas))]


def census_setup(census_dir, optimizer, learning_rate, wide_deep=False,
                 file_format='tfrecord'):
  """The setup of the census workloads: the engines' CLI flags, train
  --model=dnn (or `wide_deep`, its wide part with FTRL at
  WIDE_LEARNING_RATE) on the set's TFRecords (or `file_format`'s files)
  by its feature spec, one optimizer and constant rate, the plain loss (as
  the peers: no decay, no label smoothing, the CLI's defaults; canned's
  network, without the recipe's embedding and L2), the peers'
  shuffle buffer and seed; the tabular workloads read the same
  (`tabular`)."""
  from estimator_trainer.benchmark import census  # pylint: disable=g-import-not-at-top
  return {'model': 'wide_deep' if wide_deep else 'dnn',
          **({'linear_optimizer': 'ftrl',
              'linear_learning_rate': WIDE_LEARNING_RATE} if wide_deep
             else {}),
          'feature_spec': os.path.join(census_dir, census.FEATURE_SPEC_FILE),
          'train_files': census.files(census_dir, 'train', file_format),
          'eval_files': census.files(census_dir, 'test', file_format),
          'optimizer': optimizer, 'learning_rate': learning_rate,
          'lr_decay': 'none',
          # The peers' network and objective: canned's DNN has no periodic
          # embedding of the numbers and no L2 (the structured recipe's).
          'model_kwargs': '{"numeric_embedding": false}', 'weight_decay': 0.0,
          'shuffle_buffer': census.SHUFFLE_BUFFER, 'seed': census.SEED}


METRICS = ('accuracy', 'auc')


def _engine_metrics(model_dir):
  """An engine run's final evaluation (metrics.json), if it evaluated."""
  try:
    with open(layout.metrics_file(model_dir)) as f:
      metrics = json.load(f)
  except FileNotFoundError:
    return None
  return {key: metrics[key] for key in METRICS if key in metrics}


def run_config(name, work_dir, settings):
  """One run of configuration `name` in a subprocess: a result dict with
  `rates` and `examples_per_second` (and the tabular runs' `metrics`), or
  `error`; and `peak_rss_mb`."""
  model_dir = tempfile.mkdtemp(prefix=f'{name}_', dir=work_dir)
  result = {'config': name}
  start = time.monotonic()
  with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile(
      'w+') as err:
    proc = subprocess.Popen(command(name, model_dir, settings), stdout=out,
                            stderr=err, stdin=subprocess.DEVNULL, text=True)
    returncode, max_rss = wait_with_rusage(proc, settings.timeout_secs)
    out.seek(0)
    err.seek(0)
    stdout, stderr = out.read(), err.read()
  result['seconds'] = time.monotonic() - start
  result['peak_rss_mb'] = max_rss / 2**20
  try:
    if returncode:
      raise RuntimeError(_error_line(stderr, returncode))
    if CONFIGS[name][0] in ENGINES:
      rates = measure.read_event_rates(model_dir)
      metrics = _engine_metrics(model_dir)
    else:
      lines = [line for line in stdout.splitlines()
               if line.startswith(RESULT_PREFIX)]
      if not lines:
        raise RuntimeError(_error_line(stderr, returncode))
      output = json.loads(lines[-1][len(RESULT_PREFIX):])
      rates, metrics = output['rates'], output.get('metrics')
    if metrics:
      result['metrics'] = metrics
    result['rates'] = rates
    result['examples_per_second'] = measure.steady_rate(rates)
  except RuntimeError as e:
    result['error'] = str(e)
  shutil.rmtree(model_dir, ignore_errors=True)
  return result


def tensorflow_version(python):
  """The TensorFlow version of interpreter `python`'s stack."""
  return subprocess.run(
      [python, '-c', 'from estimator_trainer import stack; '
       'print(stack.tensorflow_version())'], capture_output=True, text=True,
      check=True).stdout.strip()


def run_rounds(names, rounds, work_dir, settings, report=None, pythons=(),
               variants=None):
  """Every configuration once per round (under each of `pythons`, labelled
  `stack` by their TensorFlow version, when given; the engines' once per
  entry of `variants`, {label: extra CLI flags}, labelled `variant`),
  interleaved; the runs' results.

  The order rotates each round, so that no configuration always runs first
  or last as the machine's speed drifts. `report(run)` follows each run.
  """
  stacks = {f'TF {tensorflow_version(python)}': python for python in pythons}
  jobs = [(name, variant, flags) for name in names
          for variant, flags in ((variants or {None: ()}).items()
                                 if CONFIGS[name][0] in ENGINES else
                                 [(None, ())])]
  runs = []
  for round_index in range(rounds):
    shift = round_index % len(jobs)
    for name, variant, flags in [*jobs[shift:], *jobs[:shift]]:
      for stack, python in (stacks or {None: settings.python}).items():
        run = run_config(name, work_dir, dataclasses.replace(
            settings, python=python,
            cli_flags=(*settings.cli_flags, *flags)))
        run['round'] = round_index
        if stack:
          run['stack'] = stack
        if variant:
          run['variant'] = variant
        runs.append(run)
        if report:
          report(run)
  return runs
