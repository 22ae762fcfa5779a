"""On the PYTHONPATH of a test's cluster tasks (test_loss_scale.py):
one_replica_overflow patches their loss scale as the test's in-process run
patches its own (their first float16 steps overflow; one step overflows on
replica 1 alone).

Patched once a process imports estimator_trainer.loss_scale, not here:
every Python process started with this PYTHONPATH (the launcher, each
task's watchdog) runs this file, and importing TensorFlow here cost each
about 3 CPU-s (and loaded it before estimator_trainer.run set up its
environment)."""

import sys


class _PatchOnImport:
  """A meta path finder that finds nothing itself: it wraps the loading of
  loss_scale, which Python's own finders find."""

  def find_spec(self, name, path, target=None):  # pylint: disable=unused-argument
    if name != 'estimator_trainer.loss_scale':
      return None
    sys.meta_path.remove(self)
    import importlib.util  # pylint: disable=g-import-not-at-top
    spec = importlib.util.find_spec(name)
    execute = spec.loader.exec_module

    def exec_module(module):
      execute(module)
      import one_replica_overflow  # pylint: disable=g-import-not-at-top
      one_replica_overflow.patch(module)
    spec.loader.exec_module = exec_module
    return spec


sys.meta_path.insert(0, _PatchOnImport())
