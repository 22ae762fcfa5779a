"""What the CLI prints: what a person needs by default, everything when asked.

By default the console shows the package's own lines (configuration, data
source, progress, evaluations, where results land), warnings and errors, and
a few of TensorFlow's INFO lines that say where a checkpoint, an evaluation
or an export went. Hidden: TensorFlow's deprecation notices (the package uses
the Estimator API on purpose), the rest of its INFO chatter, and the
start-up lines of its import (a GPU build on a machine without GPUs, oneDNN
on CPUs that have it). `--verbosity=1` shows everything.

`quiet_tensorflow` runs before TensorFlow is first imported: its C++ log
level is read once, at import, and the start-up lines are printed then.
"""

import contextlib
import gc
import importlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings

# TensorFlow's INFO lines that say where things went (tf.estimator's
# checkpoints, evaluations, early stopping; the package logs exports).
_TENSORFLOW_INFO_SHOWN = (
    'Saving checkpoints for',
    'Restoring parameters from',
    'Saving dict for global step',
    'Warm-starting from',
    'Early stopping requested',
    'Requesting early stopping',
)
# tensorflow/python/util/deprecation.py: every notice carries this line.
_DEPRECATION_MARK = 'Instructions for updating:'
# C++ errors of a GPU build's import on a machine without GPUs (and
# without the CUDA plugins' second registration), and its TensorRT probe;
# TensorFlow 2.21's say the same in other words, after absl's notice, and
# log oneDNN's INFO line whatever TF_CPP_MIN_LOG_LEVEL says.
_STARTUP_LINES = re.compile(
    r'Unable to register (cuDNN|cuFFT|cuBLAS) factory|Could not find TensorRT'
    r'|could not find cuda drivers|Cannot dlopen some GPU libraries'
    r'|failed call to cuInit'
    r'|All log messages before absl::InitializeLog\(\) is called'
    r'|oneDNN custom operations are on',
    re.IGNORECASE)
# Python warnings of TensorFlow's internals that say nothing about the run.
_INTERNAL_WARNINGS = (
    r'To make it possible to preserve tf\.data options across serialization',
)


# TensorFlow's warnings that say what the package does on purpose: a
# cluster's estimator-engine evaluation runs without a strategy unless
# --eval_strategy names one, which the distribute coordinator warned on
# every worker.
_TENSORFLOW_WARNINGS_HIDDEN = (
    '`eval_strategy` is not passed in. No distribution strategy will be used',
)
# AutoGraph meeting Python's own import machinery, which Keras's
# synchronized batch norm calls inside the estimator engine's graph: it runs
# it as-is, as it should.
_AUTOGRAPH_ON_IMPORTLIB = 'AutoGraph could not transform <function _gcd_import'


class _TensorflowFilter(logging.Filter):
  """Drops deprecation notices, TensorFlow's INFO chatter, its warnings of
  what the package does on purpose and AutoGraph's notes on Python's import
  machinery."""

  def filter(self, record):
    message = str(record.msg)
    if (_DEPRECATION_MARK in message or record.getMessage().startswith(
        (_AUTOGRAPH_ON_IMPORTLIB, *_TENSORFLOW_WARNINGS_HIDDEN))):
      return False
    return (record.levelno >= logging.WARNING or
            message.startswith(_TENSORFLOW_INFO_SHOWN))


class _LibraryInfoFilter(logging.Filter):
  """Drops the INFO lines that TensorFlow and Keras log through absl
  (SavedModel and checkpoint internals); the package's own lines stay."""

  def __init__(self):
    super().__init__()
    # Found, not imported: Keras loads later, on first use of tf.keras.
    self._library_dirs = tuple(
        os.path.dirname(spec.origin) + os.sep
        for spec in map(importlib.util.find_spec,
                        ('tensorflow', 'keras', 'tf_keras'))
        if spec and spec.origin)

  def filter(self, record):
    return (record.levelno >= logging.WARNING or
            not record.pathname.startswith(self._library_dirs))


def _import_tensorflow():
  """Imports TensorFlow into a process without it (the CLI's). Its ~350,000
  objects live as long as the process: the garbage collector, which
  rescanned them as the heap grew (a quarter of the import: 3.4 -> 2.6
  CPU-seconds on a 2-core AMD EPYC, TensorFlow 2.15), waits until they are
  made, and they are then frozen out of later collections. Where the caller
  has imported TensorFlow already, its collector is left as it is."""
  if 'tensorflow' in sys.modules:
    return
  enabled = gc.isenabled()
  gc.disable()
  try:
    importlib.import_module('tensorflow')
    gc.collect()  # What the import left as garbage is not kept frozen.
    gc.freeze()
  finally:
    if enabled:
      gc.enable()


@contextlib.contextmanager
def without_startup_lines():
  """Holds back this process's stderr (fd 2), then replays it without the
  start-up lines; C++ writes there directly, past Python's sys.stderr. (The
  test suite's processes import TensorFlow in it too: tests/conftest.py.)"""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as held:
    os.dup2(held.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      held.seek(0)
      for line in held.read().decode(errors='replace').splitlines(True):
        if not _STARTUP_LINES.search(line):
          sys.stderr.write(line)
      sys.stderr.flush()


def quiet_tensorflow(verbose):
  """Imports TensorFlow, with its noise hidden unless `verbose`."""
  # google-api-core (pulled in by the tfx extra, which TensorFlow's
  # estimator imports) warns about Python 3.11 on every start of `run` and
  # `migrate`; it says nothing about the run.
  warnings.filterwarnings('ignore', category=FutureWarning,
                          module=r'google\.api_core\.')
  if verbose:
    _import_tensorflow()
    return
  # C++ INFO and WARNING lines off, errors on; a user's setting wins.
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  for message in _INTERNAL_WARNINGS:
    warnings.filterwarnings('ignore', message=message)
  with without_startup_lines():
    _import_tensorflow()
    # TensorFlow 2.16+ probes for GPUs on first use, not on import (an
    # error-level cuInit line where there is none): probed here, held back.
    sys.modules['tensorflow'].config.list_physical_devices()
  logging.getLogger('tensorflow').addFilter(_TensorflowFilter())
  logging.getLogger('absl').addFilter(_LibraryInfoFilter())


def require_extra(extra, *modules):
  """Exits 2 with one line unless `modules` are installed: a command of the
  package's `extra` run without it ended in an ImportError's traceback."""
  missing = [name for name in modules if importlib.util.find_spec(name) is None]
  if missing:
    sys.stderr.write(f'error: this command needs the {extra} extra (pip '
                     f'install "estimator-trainer[{extra}]"): no module '
                     f'{", ".join(missing)}\n')
    sys.exit(2)
