"""scripts/plot_curves.py on the event files of a short real training run."""

import json
import math
import os
import shutil
import subprocess
import sys

from matplotlib import image
import numpy as np
import pytest

from estimator_trainer import engines
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError
import scripts_dir

SCRIPT = scripts_dir.SCRIPTS / 'plot_curves.py'
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
plot_curves = scripts_dir.load('plot_curves')

# In one pytest-xdist worker: the run they share is made once.
pytestmark = pytest.mark.xdist_group('plot_curves')


def _run_script(*flags):
  # Without conftest's TF_CPP_MIN_LOG_LEVEL: stderr as users see it.
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  return subprocess.run([sys.executable, str(SCRIPT), *flags], env=env,
                        capture_output=True, text=True, timeout=300,
                        check=False)


@pytest.fixture(scope='module')
def model_dir(tmp_path_factory, mnist_small_dir):
  """60 steps of the stack's default engine: summaries every 10 steps,
  evaluations at steps 30 and 60. In the test's process: what is read is
  the run's event files, which the command line writes alike."""
  directory = tmp_path_factory.mktemp('curves') / 'cnn'
  config = TrainConfig(
      model_dir=str(directory), idx_dir=str(mnist_small_dir),
      dataset='mnist', train_steps=60, save_checkpoints_steps=30,
      save_summary_steps=10, throttle_secs=0, export='none',
      # The plain cross-entropy: its training loss can fall below half of
      # ln 10 in 60 steps (the default smoothing's cannot go below 0.5).
      label_smoothing=0)
  engines.ENGINES[config.engine].run(config)
  return directory


@pytest.mark.slow
@pytest.mark.estimator
def test_read_curves_of_a_real_run(model_dir):
  curves = plot_curves.read_curves(str(model_dir))
  train, evaluation = curves['train'], curves['eval']
  # The engine's TrainLoopHook writes every save_summary_steps and at the
  # last step.
  for tag in ('loss', 'accuracy', 'learning_rate'):
    assert train[tag][0] == [10, 20, 30, 40, 50, 60], tag
  losses = train['loss'][1]
  # Learning: below its step-10 value, and below half of chance's ln 10.
  assert losses[-1] < losses[0] and losses[-1] < math.log(10) / 2, losses
  assert all(0 <= a <= 1 for a in train['accuracy'][1])
  for tag in ('loss', 'average_loss', 'accuracy'):
    assert evaluation[tag][0] == [30, 60], tag
  # The last evaluation point is the run's final evaluation.
  final = json.loads((model_dir / 'metrics.json').read_text())
  assert evaluation['accuracy'][1][-1] == pytest.approx(final['accuracy'])
  assert evaluation['average_loss'][1][-1] == pytest.approx(
      final['average_loss'])


@pytest.mark.slow
def test_plot_draws_train_and_eval_curves_per_model_dir(model_dir, tmp_path):
  # A second model_dir: the same events under another name.
  other = tmp_path / 'other'
  shutil.copytree(model_dir, other,
                  ignore=shutil.ignore_patterns('model.ckpt-*'))
  curves = {str(model_dir): plot_curves.read_curves(str(model_dir)),
            f'{other}/': plot_curves.read_curves(str(other))}
  output = tmp_path / 'curves.png'

  figure = plot_curves.plot(curves, str(output))

  assert output.read_bytes().startswith(PNG_MAGIC)
  train, evaluation = (curves[str(model_dir)]['train'],
                       curves[str(model_dir)]['eval'])
  loss_axes, accuracy_axes = figure.axes
  for axes, train_tag, eval_tag in ((loss_axes, 'loss', 'average_loss'),
                                    (accuracy_axes, 'accuracy', 'accuracy')):
    lines = axes.lines
    assert [line.get_label() for line in lines] == [
        'cnn train', 'cnn eval', 'other train', 'other eval']
    assert axes.get_legend() is not None
    expected = [train[train_tag], evaluation[eval_tag]] * 2
    for line, points in zip(lines, expected):
      assert list(line.get_xdata()) == points[0]
      assert list(line.get_ydata()) == points[1]
    assert [line.get_linestyle() for line in lines] == ['-', '--'] * 2
    assert [line.get_marker() for line in lines[1::2]] == ['o', 'o']
    colors = [line.get_color() for line in lines]
    assert colors[0] == colors[1] != colors[2] == colors[3]


@pytest.mark.slow
def test_script_writes_a_png(model_dir, tmp_path):
  output = tmp_path / 'curves.png'
  result = _run_script(f'--model_dirs={model_dir}', f'--output={output}',
                       '--title=MNIST, 60 steps')
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == f'Wrote {output}'
  assert list(tmp_path.iterdir()) == [output]  # No temporary file left.
  assert output.read_bytes().startswith(PNG_MAGIC)
  assert output.stat().st_size > 20_000
  pixels = image.imread(output)
  assert pixels.shape == (450, 1200, 4)
  assert len(np.unique(pixels.reshape(-1, 4), axis=0)) > 100  # Not blank.


def test_model_dir_without_events_exits_1_with_one_line(tmp_path):
  empty = tmp_path / 'empty'
  empty.mkdir()
  output = tmp_path / 'curves.png'
  result = _run_script(f'--model_dirs={empty}', f'--output={output}')
  assert result.returncode == 1
  # The last line; imported libraries may print warnings before it.
  assert 'Traceback' not in result.stderr
  assert result.stderr.splitlines()[-1] == (
      f'error: no event files in {empty} or its eval/')
  assert list(tmp_path.iterdir()) == [empty]


def test_missing_flags_exit_2_with_one_line(tmp_path):
  result = _run_script(f'--model_dirs={tmp_path}')
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      'error: --model_dirs and --output are required']


@pytest.mark.slow
@pytest.mark.parametrize('name, is_directory', [
    ('missing/curves.png', False), ('curves.png', True)])
def test_unwritable_output_raises_and_leaves_no_file(model_dir, tmp_path, name,
                                                     is_directory):
  output = tmp_path / name
  if is_directory:
    output.mkdir()  # The PNG is rendered, then cannot replace a directory.
  before = sorted(tmp_path.rglob('*'))
  curves = {str(model_dir): plot_curves.read_curves(str(model_dir))}
  with pytest.raises(TrainerError, match=f'cannot write {output}: '):
    plot_curves.plot(curves, str(output))
  assert sorted(tmp_path.rglob('*')) == before


def test_reads_v2_tensor_scalars(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.summary.create_file_writer(str(tmp_path / 'eval')).as_default():
    for step in (5, 10):
      tf.summary.scalar('accuracy', step / 10, step=step)
    tf.summary.flush()
  assert plot_curves.read_curves(str(tmp_path)) == {
      'eval': {'accuracy': ([5, 10], [0.5, 1.0])}}


def test_events_without_loss_or_accuracy_raise(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.summary.create_file_writer(str(tmp_path)).as_default():
    tf.summary.scalar('learning_rate', 0.1, step=1)
    tf.summary.flush()
  with pytest.raises(TrainerError, match='no loss or accuracy scalars'):
    plot_curves.read_curves(str(tmp_path))
