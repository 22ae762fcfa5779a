"""scripts/benchmark.py in a smoke mode: a few steps per configuration.

Checks the table's structure and the FLOP count, never timings: this machine's
speed drifts and is shared.
"""

import json
import subprocess
import sys

import pytest

from estimator_trainer import stack
from estimator_trainer.benchmark import measure
from estimator_trainer.benchmark import report
from estimator_trainer.benchmark import workloads
from estimator_trainer.models import cnn
import scripts_dir

SCRIPT = scripts_dir.SCRIPTS / 'benchmark.py'


def test_forward_macs_of_cnn():
  assert measure.forward_macs(cnn()) == 2_528_000
  assert measure.train_flop_per_example() == 15_168_000


def test_steady_rate_leaves_out_the_first_interval():
  assert measure.steady_rate([1.0, 10.0, 30.0, 20.0]) == 20.0
  with pytest.raises(RuntimeError, match='too few'):
    measure.steady_rate([5.0])


def test_summarize_ratios_and_failures():
  runs = [
      {'config': 'fit_default', 'examples_per_second': 100.0,
       'peak_rss_mb': 500.0},
      {'config': 'model_step', 'examples_per_second': 200.0,
       'peak_rss_mb': 500.0},
      {'config': 'estimator_plain', 'examples_per_second': 150.0,
       'peak_rss_mb': 500.0},
      {'config': 'estimator_default', 'examples_per_second': 150.0,
       'peak_rss_mb': 600.0},
      {'config': 'estimator_default', 'examples_per_second': 200.0,
       'peak_rss_mb': 650.0},
      {'config': 'ctl_default', 'error': 'error: no ctl', 'peak_rss_mb': 20.0},
      {'config': 'ctl_default', 'variant': 'spl10',
       'examples_per_second': 190.0, 'peak_rss_mb': 600.0},
      {'config': 'input_pipeline', 'examples_per_second': 900.0,
       'peak_rss_mb': 400.0},
  ]
  rows = {report.label(row): row for row in report.summarize(runs, 1e6)}
  # The references against themselves; no FLOP of an input pipeline.
  assert rows['fit_default']['vs_fit'] == 1.0
  assert rows['model_step']['vs_step'] == 1.0
  assert rows['model_step']['gflops'] == pytest.approx(0.2)
  assert 'gflops' not in rows['input_pipeline']
  assert rows['estimator_default']['examples_per_second'] == 175.0
  assert rows['estimator_default']['vs_fit'] == 1.75
  assert rows['estimator_default']['vs_step'] == 0.875
  assert rows['estimator_default']['peak_rss_mb'] == 650.0
  assert rows['estimator_default']['gflops'] == pytest.approx(0.175)
  assert rows['ctl_default']['error'] == 'error: no ctl'
  assert 'examples_per_second' not in rows['ctl_default']
  table = report.format_table(list(rows.values()))
  assert 'failed' in table.splitlines()[6]
  assert 'error: no ctl' in table
  # A variant's row compares with the references, which have none.
  assert rows['ctl_default [spl10]']['vs_step'] == 0.95
  assert report.target_lines(list(rows.values())) == [
      'target estimator_default: 0.88x model_step (>= 0.95x) NOT met',
      'target estimator_default: 1.17x estimator_plain (>= 1.0x) met',
      'target ctl_default [spl10]: 0.95x model_step (>= 0.95x) met']


def test_ratios_pair_the_runs_of_each_round():
  # The machine slowed down 2x between the rounds: each round's pair says
  # 0.9x, the medians alone would say 100 / 150 (0.67x).
  rates = {('model_step', 0): 200.0, ('model_step', 1): 100.0,
           ('estimator_default', 0): 180.0, ('estimator_default', 1): 90.0,
           ('estimator_plain', 0): 150.0, ('estimator_plain', 1): 100.0}
  runs = [{'config': config, 'round': r, 'examples_per_second': rate,
           'peak_rss_mb': 500.0} for (config, r), rate in rates.items()]
  # A round where model_step failed pairs with nothing.
  runs += [{'config': 'model_step', 'round': 2, 'error': 'x',
            'peak_rss_mb': 1.0},
           {'config': 'estimator_default', 'round': 2,
            'examples_per_second': 10.0, 'peak_rss_mb': 500.0}]
  rows = {row['config']: row for row in report.summarize(runs, 1e6)}
  assert rows['estimator_default']['examples_per_second'] == 90.0
  assert rows['estimator_default']['vs_step'] == pytest.approx(0.9)
  # 180 / 150 and 90 / 100.
  assert rows['estimator_default']['vs_plain'] == pytest.approx(1.05)
  assert 'vs_plain' not in rows['model_step']


@pytest.mark.default_stack_only
@pytest.mark.slow
def test_smoke_run(tmp_path):
  """fit, the benchmark's own Keras peer, run end to end in its subprocess
  (a workload's path: its RESULT line), at --precision=mixed_float16 (GPUs'
  rows); the table has its row, with the FLOP count. An engine's path
  (the CLI, its rate events) is test_census_smoke_run's keras_default: the
  benchmark runs each engine alike (`runs.command`: --precision as every
  setup value), an engine's rate events are test_engines's, every engine's
  float16 run, its loss scale, test_loss_scale's. The other workloads run
  in this process: a process each adds a TensorFlow import, not a path;
  their rows' ratios, FLOP and targets are
  test_summarize_ratios_and_failures's."""
  configs = ['fit_default']
  output = tmp_path / 'result.json'
  result = subprocess.run(
      [sys.executable, str(SCRIPT), '--steps=6', '--summary_steps=2',
       '--batch_size=8', '--precision=mixed_float16',
       f'--configs={",".join(configs)}',
       f'--json_output={output}', f'--work_dir={tmp_path / "work"}'],
      capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.strip().splitlines()
  assert lines[1].split()[:2] == ['configuration', 'examples/s']
  assert [line.split()[0] for line in lines[3:]] == configs
  assert 'failed' not in lines[3]
  saved = json.loads(output.read_text())
  assert saved['flop_per_example'] == 15_168_000
  assert [row['config'] for row in saved['rows']] == configs
  for row in saved['rows']:
    assert row['examples_per_second'] > 0, row
    assert row['gflops'] > 0, row
    assert row['peak_rss_mb'] > 100, row  # TensorFlow's, not this script's.
  # Model dirs are cleaned up as the runs go.
  assert not list((tmp_path / 'work').iterdir())
  # The other kinds (fit's workload is fit_default's, precision the
  # model's), on the setup the script gives them: rates a steady rate is
  # read from.
  kinds = ['input', 'step'] + (
      ['plain_estimator'] if stack.has_estimator() else [])
  for kind in kinds:
    rates = workloads.run(kind, {'model': 'cnn', 'precision': 'float32'},
                          'default', steps=6, batch_size=8, every_steps=2,
                          cpu_replicas=0)['rates']
    assert measure.steady_rate(rates) > 0, kind
