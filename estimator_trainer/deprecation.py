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


def moved_names(module, moved):
  """A module's __getattr__ for the names that moved out of module
  `module`: `moved` maps each to (the 'package.module.name' it moved to,
  the release that removes the alias); each use warns."""
  def getattr_(name):
    if name in moved:
      new, removed_in = moved[name]
      warn(f'{module}.{name}', new, removed_in)
      return moved_to(new)
    raise AttributeError(f'module {module!r} has no attribute {name!r}')
  return getattr_
