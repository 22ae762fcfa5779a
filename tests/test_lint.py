"""No unused import or variable, no redefinition, no undefined name in the
package, its tests and scripts (ruff's pyflakes rules; ruff.toml exempts
the modules whose imports are re-exports). Runs where ruff is installed
(the `docs` extra: the TensorFlow 2.15 stack)."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
RULES = 'F401,F841,F811,F821'


def test_no_unused_or_undefined_names():
  if importlib.util.find_spec('ruff') is None:
    pytest.skip('ruff is not installed (the docs extra)')
  result = subprocess.run(
      [sys.executable, '-m', 'ruff', 'check', '--no-cache', '--select', RULES, '--output-format',
       'concise', 'estimator_trainer', 'tests', 'scripts'],
      cwd=REPO, capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stdout + result.stderr
