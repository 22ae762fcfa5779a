"""The repository's scripts/ as modules, for the tests of those scripts."""

import importlib.util
import pathlib

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / 'scripts'


def load(name):
  """scripts/<name>.py imported as module `name` (scripts/ is no package)."""
  spec = importlib.util.spec_from_file_location(name, SCRIPTS / f'{name}.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
