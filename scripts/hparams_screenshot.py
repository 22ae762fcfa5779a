#!/usr/bin/env python3
"""A screenshot of TensorBoard's HParams page over two structured runs.

    python scripts/hparams_screenshot.py

Writes a small census-like set, trains two short runs on its CSV (the
default linear model, and `--model=dnn` at another rate), serves their
parent directory with `tensorboard` and shoots its HParams tab with headless
Chromium (as scripts/docs_screenshots.py does) into
docs/screenshots/hparams.png: the columns the table shows at first, its
rows named by run.
"""

import contextlib
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

from absl import app
from absl import flags

import docs_screenshots

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLAGS = flags.FLAGS
# run name -> its flags beyond the data's.
RUNS = {
    'linear': (),
    'dnn': ('--model=dnn', '--learning_rate=0.003'),
}
# The table's rows are on the page once TensorBoard has read both runs: its
# text, through the page's shadow roots, names both model_dirs.
_TABLE_READY = (
    "(function text(node) { let all = node.shadowRoot ? "
    "text(node.shadowRoot) : ''; for (const child of node.childNodes) "
    "all += child.nodeType === 3 ? child.textContent : text(child); "
    "return all; })(document.body).includes('/runs/dnn')")


def _python(*argv):
  env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
      [str(ROOT), os.environ.get('PYTHONPATH', '')])}
  subprocess.run([sys.executable, *argv], env=env, check=True,
                 stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def _tensorboard(logdir):
  port = docs_screenshots._free_port()  # pylint: disable=protected-access
  server = subprocess.Popen(
      [sys.executable, '-m', 'tensorboard.main', f'--logdir={logdir}',
       '--host=127.0.0.1', f'--port={port}'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  url = f'http://127.0.0.1:{port}'
  try:
    deadline = time.monotonic() + 120
    while True:
      try:
        urllib.request.urlopen(f'{url}/data/runs', timeout=5)
        break
      except OSError:
        if time.monotonic() > deadline or server.poll() is not None:
          raise
        time.sleep(0.5)
    yield url
  finally:
    server.terminate()
    server.wait()


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as tmp:
    data, runs = pathlib.Path(tmp) / 'census', pathlib.Path(tmp) / 'runs'
    _python(str(ROOT / 'scripts' / 'make_census_like.py'),
            f'--output_dir={data}', '--rows=4000', '--num_shards=1')
    for name, flags_ in RUNS.items():
      _python('-m', 'estimator_trainer.run',
              f'--train_files={data}/train-00000-of-00001.csv',
              f'--eval_files={data}/test-00000-of-00001.csv',
              '--label_key=income',
              '--train_steps=200', '--export=none',
              f'--model_dir={runs / name}', *flags_)
    with _tensorboard(runs) as url, docs_screenshots._browser() as call:  # pylint: disable=protected-access
      docs_screenshots._shoot(  # pylint: disable=protected-access
          call, f'{url}/#hparams', _TABLE_READY,
          pathlib.Path(FLAGS.output_dir) / 'hparams.png')


if __name__ == '__main__':
  app.run(main)
