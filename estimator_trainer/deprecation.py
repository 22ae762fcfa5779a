"""Public names that were removed or renamed keep working for one release,
with a DeprecationWarning that names their replacement (docs/CHANGELOG.md
lists them under Deprecated, with the release that removes them)."""

import importlib
import warnings


def warn(old, new, removed_in):
  """Warns, at the caller's caller, that `old` is deprecated for `new`."""
  warnings.warn(f'{old} is deprecated and will be removed in {removed_in}: '
                f'use {new}', DeprecationWarning, stacklevel=3)


def moved_to(path):
  """The object at `path` ('package.module.name'), imported on use: a low
  module's alias of a name that moved up to an engine names it rather than
  importing that engine (which imports the low module: a circle)."""
  module, _, name = path.rpartition('.')
  return getattr(importlib.import_module(module), name)
