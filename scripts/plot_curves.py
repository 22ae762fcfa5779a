#!/usr/bin/env python3
"""Plots the learning curves of model_dirs to a PNG, without TensorBoard.

    python scripts/plot_curves.py --model_dirs=runs/adam,runs/sgd \\
        --output=curves.png --title="Fashion-MNIST"

Two panels, loss and accuracy against the global step: per model_dir, the
training curve (solid) from the events in <model_dir> and the evaluation
curve (dashed) from <model_dir>/eval, labelled with the model_dir's name.
Exit codes: 0 success, 1 runtime error, 2 usage error.
"""

import errno
import io
import os

from absl import app
from absl import flags
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from estimator_trainer import errors
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer.errors import TrainerError, UsageError

FLAGS = flags.FLAGS

# Panel -> (training tag, evaluation tags by preference). Evaluation's
# average_loss is the exact mean over the test set, its loss a mean of batch
# losses.
PANELS = {
    'loss': ('loss', ('average_loss', 'loss')),
    'accuracy': ('accuracy', ('accuracy',)),
}


def _define_flags():
  """Only when run as a script: tests import the functions beside run.py's."""
  flags.DEFINE_list('model_dirs', None, 'Comma-separated model_dirs to plot.')
  flags.DEFINE_string('output', None, 'Path of the PNG to write.')
  flags.DEFINE_string('title', None, 'Title of the figure.')


def _read_scalars(directory):
  """{tag: (steps, values)} of the scalar summaries of one run directory."""
  return {tag: tuple(map(list, zip(*points)))
          for tag, points in layout.read_scalars(directory).items()}


def read_curves(model_dir):
  """{'train'|'eval': {tag: (steps, values)}} of a model_dir's event files.

  A run without event files is left out. Raises TrainerError when there is
  no event file, or no loss or accuracy to plot.
  """
  curves = {}
  for run, directory in (('train', model_dir),
                         ('eval', layout.eval_dir(model_dir))):
    scalars = _read_scalars(directory)
    if scalars:
      curves[run] = scalars
  if not curves:
    raise TrainerError(f'no event files in {model_dir} or its eval/')
  plotted = {tag for train_tag, eval_tags in PANELS.values()
             for tag in (train_tag, *eval_tags)}
  if not any(plotted & scalars.keys() for scalars in curves.values()):
    raise TrainerError(f'no loss or accuracy scalars in {model_dir}')
  return curves


def plot(curves_by_dir, output, title=None):
  """Draws {model_dir: read_curves(model_dir)} to the PNG `output`.

  Returns the matplotlib Figure. Raises TrainerError if `output` cannot be
  written.
  """
  figure = Figure(figsize=(12, 4.5), layout='constrained')
  FigureCanvasAgg(figure)
  axes = figure.subplots(1, len(PANELS))
  for ax, (panel, (train_tag, eval_tags)) in zip(axes, PANELS.items()):
    for i, (model_dir, curves) in enumerate(curves_by_dir.items()):
      name = os.path.basename(os.path.normpath(model_dir))
      color = f'C{i % 10}'  # A color per model_dir, shared by its 2 curves.
      train = curves.get('train', {})
      if train_tag in train:
        ax.plot(*train[train_tag], color=color, label=f'{name} train')
      evaluation = curves.get('eval', {})
      for tag in eval_tags:
        if tag in evaluation:
          ax.plot(*evaluation[tag], color=color, linestyle='--', marker='o',
                  label=f'{name} eval')
          break
    ax.set(title=panel, xlabel='global step')
    ax.grid(alpha=0.3)
    if ax.lines:
      ax.legend(fontsize='small')
  if title:
    figure.suptitle(title)
  _write_png(figure, output)
  return figure


def _write_png(figure, output):
  """Writes the PNG atomically: never a half-written file. The directory
  must exist: a mistyped path is an error, not a new directory."""
  buffer = io.BytesIO()
  figure.savefig(buffer, format='png')
  try:
    if not os.path.isdir(os.path.dirname(os.path.abspath(output))):
      raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    outputs.write_atomic(output, buffer.getvalue())
  except OSError as e:
    raise TrainerError(f'cannot write {output}: {e.strerror}') from None


def main(argv):
  try:
    if len(argv) > 1:
      raise UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
    if not FLAGS.model_dirs or not FLAGS.output:
      raise UsageError('--model_dirs and --output are required')
    curves_by_dir = {d: read_curves(d) for d in FLAGS.model_dirs}
    plot(curves_by_dir, FLAGS.output, title=FLAGS.title)
  except TrainerError as e:
    errors.fail(e.exit_code, str(e))
  print(f'Wrote {FLAGS.output}')


if __name__ == '__main__':
  _define_flags()
  app.run(main, flags_parser=errors.parse_flags)
