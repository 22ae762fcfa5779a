#!/usr/bin/env python3
"""The docs' sample console output, from a real run.

    python scripts/sample_output.py          # rewrite the docs' samples
    python scripts/sample_output.py --check  # exit 1 where they differ

Runs what `bash scripts/train.sh --train_epochs=1` runs (1 epoch of
Fashion-MNIST with the CLI's defaults, in a temporary model_dir) and writes
its console, abridged, into the blocks marked `<!-- sample output -->`
(README.md, docs/getting-started.md) and `<!-- sample progress line -->`
(docs/guide/command-line.md). `--check` compares with the figures that
depend on the machine or the run (timings, losses, metrics, how far the
progress line is, the export's timestamp) masked; tests/test_docs.py runs
it so.
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLAGS = flags.FLAGS
# Marker -> the pages whose block after it the sample is.
PAGES = {
    'sample output': ('README.md', 'docs/getting-started.md'),
    'sample progress line': ('docs/guide/command-line.md',),
}
_ABSL_PREFIX = re.compile(r'^[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ')
_PROGRESS = re.compile(r'^step \d+/\d+ ')
# What differs from run to run and machine to machine.
_MASKS = (
    (re.compile(r'^step \d+/(\d+) \(\d+%\)'), r'step N/\1 (N%)'),
    (re.compile(r'[\d,]+ examples/s ETA \S+'), 'N examples/s ETA T'),
    (re.compile(r'/export/final/\d+'), '/export/final/T'),
    (re.compile(r'\b\d+\.\d+\b'), 'X'),
)


def console(model_dir, run=None):
  """The console lines (absl's prefix stripped) of the run into
  `model_dir`: its process, this checkout's package first, or `run`'s
  (a command line -> a subprocess.CompletedProcess of text)."""
  command = [sys.executable, '-m', 'estimator_trainer.run',
             f'--model_dir={model_dir}', '--train_epochs=1']
  result = run(command) if run else subprocess.run(
      command, env={**os.environ, 'PYTHONPATH': os.pathsep.join(
          [str(ROOT), os.environ.get('PYTHONPATH', '')])},
      capture_output=True, text=True, check=False)
  if result.returncode:
    raise RuntimeError(f'the run failed:\n{result.stderr[-3000:]}')
  return [_ABSL_PREFIX.sub('', line) for line in result.stderr.splitlines()]


def samples(lines, model_dir):
  """marker -> the sample's lines, of the run's `lines` into `model_dir`
  (shown as .../runs/fashion_mnist, as under scripts/train.sh)."""
  lines = [line.replace(str(model_dir), '.../runs/fashion_mnist')
           for line in lines]
  first = lambda prefix: next(line for line in lines
                              if line.startswith(prefix))
  progress = [line for line in lines if _PROGRESS.match(line)][-1]
  # The first two metrics, and the first of the final ones.
  evaluated = ', '.join(first('Saving dict for global step').split(', ')[:2])
  final = first('Final evaluation').split(', ')[0]
  return {
      'sample output': [first('Config: '), progress, f'{evaluated}, ...',
                        first('Exported a SavedModel to '), f'{final}, ...}}'],
      'sample progress line': [progress],
  }


def mask(lines):
  masked = []
  for line in lines:
    for pattern, replacement in _MASKS:
      if not line.startswith('Config: '):  # Its figures are the run's plan.
        line = pattern.sub(replacement, line)
    masked.append(line)
  return masked


def _block(marker):
  return re.compile(rf'(<!-- {marker} -->\n```text\n)(.*?)(\n```)', re.S)


def documented(page, marker):
  """The lines of `page`'s block marked `marker`."""
  found = _block(marker).search((ROOT / page).read_text())
  if not found:
    raise ValueError(f'{page}: no block marked <!-- {marker} -->')
  return found.group(2).splitlines()


def differences(sampled):
  """(page, marker, documented, sampled) of each block that differs from
  the `sampled` samples, masked."""
  return [(page, marker, documented(page, marker), lines)
          for marker, lines in sampled.items() for page in PAGES[marker]
          if mask(documented(page, marker)) != mask(lines)]


def write(sampled):
  for marker, lines in sampled.items():
    for page in PAGES[marker]:
      path = ROOT / page
      path.write_text(_block(marker).sub(
          lambda found: found.group(1) + '\n'.join(lines) + found.group(3),
          path.read_text(), count=1))


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as tmp:
    model_dir = pathlib.Path(tmp) / 'runs' / 'fashion_mnist'
    sampled = samples(console(model_dir), model_dir)
  if not FLAGS.check:
    write(sampled)
    return 0
  differing = differences(sampled)
  for page, marker, shown, lines in differing:
    print(f'{page} <!-- {marker} -->: the page shows\n  ' +
          '\n  '.join(shown) + '\nthe run printed\n  ' + '\n  '.join(lines))
  return 1 if differing else 0


if __name__ == '__main__':
  flags.DEFINE_bool('check', False, 'Compare the docs\' samples with the '
                    'run\'s, masked, instead of writing them.')
  app.run(main)
