"""Exact steps under TF2 parameter servers (tf2/exact_steps.py): a closure
the ClusterCoordinator runs again after its worker's failure applies no
step twice, and a step lost with a worker is run again. On a cluster in a
process of its own (exact_steps_cluster.py), each engine's scheduled
function run as the coordinator runs it."""

import json
import pathlib
import sys

import pytest

import warm_process

# One process (8 CPU-s) for both engines' tests: over the fast set's budget.
pytestmark = [pytest.mark.both_stacks, pytest.mark.slow,
              pytest.mark.xdist_group('exact_steps')]

BATCH = 4  # exact_steps_cluster.py's batch.


@pytest.fixture(scope='module')
def measured():
  """exact_steps_cluster.py's report, by engine."""
  # A warm process (warm_process.py), the module run from the tests'
  # directory: the package it imports is the server's, these tests'.
  result = warm_process.run(
      [sys.executable, '-m', 'exact_steps_cluster'], 300,
      cwd=str(pathlib.Path(__file__).resolve().parent))
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_ctl_applies_each_step_once_and_counts_the_steps_applied(measured):
  """Steps claimed to a stop 3 steps away: a closure of 5 applies 3 (the
  metrics and the clipped gradient's norm count those 3); the same
  closure again (a rerun) moves no weight, average or count; a round
  whose worker claimed a step and died before its update ends at the
  stop, and the runner returns the optimizer's count (on main: 5, then 10
  steps applied)."""
  report = measured['ctl']
  assert report['applied'] == 3 and report['first']['step'] == 3
  assert report['rerun_applied'] == 0 and report['rerun'] == report['first']
  assert report['metric_count'] == 3 * BATCH and report['norm_count'] == 3
  assert report['run_returned'] == report['run_step'] == 8


def test_keras_fit_applies_each_step_once_and_counts_the_steps_applied(
    measured):
  """fit's train function under claims: a fit of 5 steps to a stop 3 steps
  away applies 3 (its loss metric counts 3 batches); a second fit (a rerun
  of its closures) moves no weight or average and counts nothing (on
  main: 5, then 10 steps)."""
  report = measured['keras']
  assert report['metrics'][0] == 'loss'
  assert report['first']['step'] == 3
  assert report['first_metric_count'] == 3 * BATCH
  assert report['rerun'] == report['first']
  assert report['rerun_metric_count'] == 0
