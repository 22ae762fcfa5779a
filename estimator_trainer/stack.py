"""The TensorFlow stack of this process: TensorFlow 2.15 with Estimator (the
default install, constraints.txt) or TensorFlow 2.16+ with tf-keras
(constraints-tf221.txt), where the TF2 engines run and the estimator engine
cannot: tf.estimator is gone from TensorFlow 2.16 on.

Imports no TensorFlow: the CLI checks flags first, and Keras 2 must be
chosen before TensorFlow loads.
"""

import importlib.metadata
import importlib.util
import os
import sys

from estimator_trainer.errors import UsageError

# TensorFlow's distributions on PyPI; `tensorflow` pulls in the platform one.
_DISTRIBUTIONS = ('tensorflow', 'tensorflow-cpu', 'tensorflow-intel')


def tensorflow_version():
  """The installed TensorFlow's version string, or None."""
  for name in _DISTRIBUTIONS:
    try:
      return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      pass
  return None


def _before_2_16(version):
  major, minor = (int(part) for part in version.split('.')[:2])
  return (major, minor) < (2, 16)


def before_2_16():
  """Whether this is TensorFlow 2.15 or earlier (False without one)."""
  version = tensorflow_version()
  return bool(version) and _before_2_16(version)


def has_estimator():
  version = tensorflow_version()
  return bool(version and _before_2_16(version) and
              importlib.util.find_spec('tensorflow_estimator'))


def default_engine():
  """The CLI's default --engine: estimator where it runs, else ctl."""
  return 'estimator' if has_estimator() else 'ctl'


class EstimatorMissing(UsageError, ImportError):
  """tf.estimator is not there: a usage error (exit 2) for the CLI, an
  ImportError for code importing the estimator engine."""


def require_estimator(what):
  """Fails, in one line, when `what` (the estimator engine, trainer_fn)
  cannot run on this stack."""
  if not has_estimator():
    raise EstimatorMissing(
        f'{what} needs TensorFlow 2.15 with tensorflow-estimator '
        f'(tf.estimator is gone from TensorFlow 2.16); this is TensorFlow '
        f'{tensorflow_version()} (the TF2 engines run here: --engine=ctl or '
        'keras; Estimator needs the default install, constraints.txt)')


def use_keras_2():
  """Makes tf.keras Keras 2 on TensorFlow 2.16+: the tf-keras package, via
  TF_USE_LEGACY_KERAS=1, which TensorFlow reads when it loads. (Keras 3 has
  no MultiWorkerMirroredStrategy nor parameter-server training.) A user's
  setting wins; too late once TensorFlow is loaded."""
  version = tensorflow_version()
  if ('tensorflow' not in sys.modules and version and
      not _before_2_16(version) and importlib.util.find_spec('tf_keras')):
    os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
