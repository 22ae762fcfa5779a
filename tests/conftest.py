"""Shared fixtures. Splits the CPU into 2 logical devices before TensorFlow
initializes, so that tests can run MirroredStrategy with 2 replicas."""

import gc
import gzip
import importlib
import json
import os
import pathlib
import resource
import shutil

import numpy as np
import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# The suite runs several TensorFlow processes at once on few cores (a
# cluster's tasks, the two parts of scripts/test.sh): one thread per op in
# each, not one per core, so that their thread pools do not compete for the
# cores. Measured on 2 cores: the cluster tests took 22 % less CPU and 18 %
# less time.
os.environ.setdefault('TF_NUM_INTRAOP_THREADS', '1')
# A test process runs hundreds of tests, and each leaves objects behind
# (graphs, layers, traced functions): at CPython's default thresholds a full
# collection scans that growing heap every few tests. Rarer full collections,
# with the imports frozen out of them (pytest_collection_finish), took
# test_engines.py from 58 to 53 CPU-s on a 2-core AMD EPYC (its peak RSS
# 1.20 -> 1.24 GiB): the garbage collector had taken 5.6 of the 58.
gc.set_threshold(10_000, 10, 100)

from estimator_trainer import console  # pylint: disable=g-import-not-at-top

# TensorFlow's first import and use, without the C++ start-up lines of a GPU
# build on a machine without GPUs, as in the CLI (issue 75, item 5: xdist's
# workers passed them on to scripts/test.sh's output).
with console.without_startup_lines():
  importlib.import_module('tensorflow').config.list_physical_devices()

from estimator_trainer import sources  # pylint: disable=g-import-not-at-top
from estimator_trainer.engines import TF2_ENGINES  # pylint: disable=g-import-not-at-top
from estimator_trainer import stack  # pylint: disable=g-import-not-at-top
from estimator_trainer.strategy import configure_cpu_replicas  # pylint: disable=g-import-not-at-top
import kept_output  # pylint: disable=g-import-not-at-top
import warm_process  # pylint: disable=g-import-not-at-top

TEST_REPLICAS = 2
configure_cpu_replicas(TEST_REPLICAS)

FASHION_MNIST = pathlib.Path(sources.DEBIAN_IDX_DIRS['fashion_mnist'])


def _require(directory, how):
  if not directory.is_dir():
    pytest.fail(f'{directory} is missing: {how}')
  return directory


@pytest.fixture(scope='session')
def fashion_mnist_dir():
  """Real Fashion-MNIST (60k/10k), installed by scripts/setup_env.sh."""
  return _require(FASHION_MNIST, 'run the tests through scripts/test.sh')


@pytest.fixture
def estimator():
  """The estimator engine (estimator_trainer.estimator); skips the test
  where tf.estimator is missing (TensorFlow 2.16+)."""
  return pytest.importorskip('estimator_trainer.estimator',
                             exc_type=ImportError)


def write_idx(path, magic, dims, payload, truncate=0):
  """Writes a gzipped IDX file of `payload` (uint8 examples of shape `dims`),
  cut short by `truncate` bytes."""
  header = np.array([magic, len(payload), *dims], '>u4').tobytes()
  blob = gzip.compress(header + np.asarray(payload, np.uint8).tobytes())
  path.write_bytes(blob[:len(blob) - truncate] if truncate else blob)


# The test split of mnist_small_dir: enough for accuracy to mean something,
# and every evaluation of the suite's runs 5x cheaper than all 10,000.
MNIST_SMALL_TEST_EXAMPLES = 2000


@pytest.fixture(scope='session')
def mnist_small_dir(tmp_path_factory, fashion_mnist_dir):
  """An IDX dir in MNIST's format, of real Fashion-MNIST images (from the
  set-up's Debian package): the train split is its whole t10k set, the test
  split that set's first MNIST_SMALL_TEST_EXAMPLES.

  Lets TRAIN-mode code run on real images without the 60k train split.
  """
  return write_small_mnist(tmp_path_factory.mktemp('mnist_small'),
                           fashion_mnist_dir, MNIST_SMALL_TEST_EXAMPLES)


def write_small_mnist(directory, fashion_mnist_dir, test_examples):
  """Writes mnist_small_dir's files into `directory`, its test split the
  first `test_examples`; returns `directory`."""
  for src, dst in zip(sources.IDX_FILES[sources.TEST],
                      sources.IDX_FILES[sources.TRAIN]):
    shutil.copy(fashion_mnist_dir / src, directory / dst)
  images, labels = (
      gzip.decompress((fashion_mnist_dir / name).read_bytes())[header:]
      for name, header in zip(sources.IDX_FILES[sources.TEST], (16, 8)))
  test = slice(test_examples)
  write_idx(directory / sources.IDX_FILES[sources.TEST][0], 2051, (28, 28),
            np.frombuffer(images, np.uint8).reshape(-1, 28, 28)[test])
  write_idx(directory / sources.IDX_FILES[sources.TEST][1], 2049, (),
            np.frombuffer(labels, np.uint8)[test])
  return directory


_OUTCOMES = ('passed', 'failed', 'error', 'skipped', 'deselected')
# What a test not marked slow may cost: the fast set (-m "not slow") of
# both stacks within 5 minutes on 2 cores.
FAST_CPU_SECONDS = 6
# CPU seconds by test id (this part's): unlike wall times, which the other
# part's load stretches (scripts/test.sh), what a test costs the suite.
_CPU_SECONDS = {}


def _cpu_seconds():
  """User and system CPU of this process and the subprocesses it waited
  for (a cluster's tasks, a CLI run), warm ones included."""
  return warm_process.cpu_seconds() + sum(
      usage.ru_utime + usage.ru_stime for usage in (
          resource.getrusage(resource.RUSAGE_SELF),
          resource.getrusage(resource.RUSAGE_CHILDREN)))


def pytest_collection_finish(session):  # pylint: disable=unused-argument
  gc.collect()
  gc.freeze()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
  item.cpu_start = _cpu_seconds()
  yield


def pytest_runtest_logreport(report):
  properties = dict(report.user_properties)
  if 'cpu_seconds' in properties:
    _CPU_SECONDS[report.nodeid] = (properties['cpu_seconds'],
                                   properties['marks'])


def _write_cpu_list(config):
  """Every test's CPU seconds and marks, costliest first, in
  test-logs/cpu-<stack>-<part>.tsv: what the budget is cut from."""
  kept_output.DIRECTORY.mkdir(parents=True, exist_ok=True)
  path = kept_output.DIRECTORY / (
      f'cpu-{stack.tensorflow_version()}-{config.getoption("--part")}.tsv')
  with open(path, 'w') as f:
    for nodeid, (seconds, marks) in sorted(_CPU_SECONDS.items(),
                                           key=lambda item: -item[1][0]):
      f.write(f'{seconds:.1f}\t{marks}\t{nodeid}\n')
  return path


def pytest_terminal_summary(terminalreporter):
  """Appends this run's counts to $PYTEST_COUNTS_FILE when set (test.sh
  totals its two parts). At the very end of a red run: each failing test
  and the last lines of its report (the assertion and the log tail it
  carries)."""
  counts_file = os.environ.get('PYTEST_COUNTS_FILE')
  # Not in xdist's workers: the controller holds every worker's reports.
  if counts_file and not hasattr(terminalreporter.config, 'workerinput'):
    with open(counts_file, 'a') as f:
      f.write(json.dumps({outcome: len(terminalreporter.stats.get(outcome, []))
                          for outcome in _OUTCOMES}) + '\n')
  if _CPU_SECONDS:
    path = _write_cpu_list(terminalreporter.config)
    terminalreporter.section(
        f'CPU: {sum(seconds for seconds, _ in _CPU_SECONDS.values()):.0f} s '
        'in all; the 40 costliest tests (with their subprocesses, setup '
        f'included; every test in {path})')
    for nodeid, (seconds, _) in sorted(_CPU_SECONDS.items(),
                                       key=lambda item: -item[1][0])[:40]:
      terminalreporter.write_line(f'{seconds:8.1f}s cpu  {nodeid}')
    over = sorted((seconds, nodeid) for nodeid, (seconds, marks) in
                  _CPU_SECONDS.items()
                  if seconds > FAST_CPU_SECONDS and 'slow' not in marks)
    if over:
      terminalreporter.section(
          f'Not marked slow, over {FAST_CPU_SECONDS} CPU-seconds (the fast '
          "set's budget: make them cheaper or mark them slow)")
      for seconds, nodeid in reversed(over):
        terminalreporter.write_line(f'{seconds:8.1f}s cpu  {nodeid}')
  failed = [*terminalreporter.stats.get('failed', []),
            *terminalreporter.stats.get('error', [])]
  if not failed:
    return
  terminalreporter.section('failed tests: last lines')
  for report in failed:
    terminalreporter.write_line(f'{report.nodeid} ({report.when})')
    for line in report.longreprtext.splitlines()[-25:]:
      terminalreporter.write_line(f'    {line}')
    for title, path in report.sections:
      if title == 'kept output':
        terminalreporter.write_line(f'    whole output of a subprocess: {path}')


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
  """A failing test's report names the files of its subprocesses' whole
  output (kept_output.py), which stay; a passing test's are deleted at its
  teardown."""
  report = (yield).get_result()
  if report.when == 'teardown' and hasattr(item, 'cpu_start'):
    report.user_properties.append(
        ('cpu_seconds', _cpu_seconds() - item.cpu_start))
    report.user_properties.append(('marks', ','.join(sorted(
        {mark.name for mark in item.iter_markers()} &
        {'slow', 'serial', 'estimator', 'default_stack_only'})) or '-'))
  if report.failed:
    for path in kept_output.settle(failed=True):
      report.sections.append(('kept output', str(path)))
  elif report.when == 'teardown':
    kept_output.settle(failed=False)


def pytest_addoption(parser):
  parser.addoption(
      '--part', choices=('all', 'parallel', 'serial'), default='all',
      help='run the tests marked serial only, or all the others only '
      '(scripts/test.sh runs the others two at a time, then these alone)')


def _default_stack_only(item):
  """Whether `item` runs on the default stack alone. The other stack runs
  what can differ between the stacks, not this package's logic twice: a
  test parametrized by a TF2 engine runs there only when marked
  `both_stacks` (what TensorFlow and Keras do for it: checkpoints,
  SavedModels, distribution, clusters, signals, metrics, layers); the
  default stack has every engine and runs every test."""
  if item.get_closest_marker('both_stacks'):
    return False
  if item.get_closest_marker('default_stack_only'):
    return True
  callspec = getattr(item, 'callspec', None)
  return bool(callspec) and callspec.params.get('engine') in TF2_ENGINES


def pytest_collection_modifyitems(config, items):
  if not stack.has_estimator():
    version = stack.tensorflow_version()
    needs_estimator = pytest.mark.skip(
        reason=f'needs tf.estimator (TensorFlow 2.15): this is TensorFlow '
        f'{version}')
    default_stack = pytest.mark.skip(
        reason='tests this package\'s own logic, which the default stack '
        f'runs; TensorFlow {version} runs what can differ (both_stacks)')
    for item in items:
      if item.get_closest_marker('estimator'):
        item.add_marker(needs_estimator)
      elif _default_stack_only(item):
        item.add_marker(default_stack)
  part = config.getoption('--part')
  if part == 'all':
    return
  keep, drop = [], []
  for item in items:
    serial = item.get_closest_marker('serial') is not None
    (keep if serial == (part == 'serial') else drop).append(item)
  config.hook.pytest_deselected(items=drop)
  if part == 'parallel':
    # xdist hands out a module's group whole, the largest groups first,
    # then the other tests in this order: the slow ones first, so that the
    # last are short and neither worker idles long while the other ends a
    # long one (a clean-clone run's CPU lists replayed, 2-core Intel Xeon:
    # TensorFlow 2.15's part ends at 880 CPU-seconds a worker instead of
    # 911, 2.21's at 217 instead of 232). A module fixture that trains
    # serves slow tests only (a test reading one is marked slow), which
    # stay together: it is still made once a worker.
    keep.sort(key=lambda item: not _costly(item))
  items[:] = keep


def _costly(item):
  """Marked slow and not skipped."""
  return (item.get_closest_marker('slow') is not None
          and item.get_closest_marker('skip') is None)
