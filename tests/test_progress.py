"""Progress display: a bar on a terminal, plain lines otherwise."""

import io
import json
import logging

from absl import logging as absl_logging
import numpy as np

from estimator_trainer import outputs
from estimator_trainer import progress


class _Terminal(io.StringIO):

  def isatty(self):
    return True


def test_terminal_gets_a_bar_with_loss_rate_and_eta(monkeypatch):
  clock = iter(range(0, 100, 2))
  monkeypatch.setattr(progress.time, 'monotonic', lambda: next(clock))
  terminal = _Terminal()
  shown = progress.Progress(max_steps=100, global_batch_size=64,
                            stream=terminal)
  handler = absl_logging.get_absl_handler().python_handler
  log_stream = handler.stream
  for step in (1, 21, 41):
    shown.update(step, loss=0.5)
  # Meanwhile, log lines go through tqdm so that the bar stays below them.
  assert handler.stream is not log_stream
  shown.update(100, loss=0.25)
  shown.close()
  assert handler.stream is log_stream
  bar = terminal.getvalue().split('\r')[-1]
  # 59 steps of 64 examples in 2 s since the last display.
  assert '100/100' in bar and 'train loss=0.2500' in bar
  assert 'examples_per_s=1,888' in bar


def test_plain_lines_when_not_a_terminal(monkeypatch, caplog):
  clock = iter([0, 5, 12, 13, 30])
  monkeypatch.setattr(progress.time, 'monotonic', lambda: next(clock))
  caplog.set_level(logging.INFO, logger=progress.__name__)
  shown = progress.Progress(max_steps=1000, global_batch_size=10,
                            stream=io.StringIO(), every_secs=10)
  for step in (0, 100, 240, 250, 1000):
    shown.update(step, loss=1.0)
  # The first step starts the clock, then a line every 10 s and at the end.
  assert [record.getMessage() for record in caplog.records] == [
      'step 240/1000 (24%) train loss 1.0000 200 examples/s ETA 0m38s',
      'step 1000/1000 (100%) train loss 1.0000 422 examples/s ETA 0m00s',
  ]


def test_the_line_says_what_its_loss_is(monkeypatch, caplog):
  """Issue 75, item 1: with label smoothing 0.1 the training loss stays
  above ~0.5 while evaluation's is 0.3, and the line said only 'loss'."""
  hparams = {'head': 'multiclass', 'label_smoothing': 0.1,
             'weight_decay': 0.0}
  assert progress.loss_name(hparams) == 'train loss (label-smoothed)'
  assert progress.loss_name({**hparams, 'weight_decay': 1e-5}) == (
      'train loss (label-smoothed, with L2)')
  # A binary head's loss is not smoothed (heads.make).
  assert progress.loss_name({**hparams, 'head': 'binary'}) == 'train loss'
  clock = iter([0, 20])
  monkeypatch.setattr(progress.time, 'monotonic', lambda: next(clock))
  caplog.set_level(logging.INFO, logger=progress.__name__)
  shown = progress.Progress(10, 1, progress.loss_name(hparams),
                            stream=io.StringIO())
  shown.update(0, loss=0.6)
  shown.update(10, loss=0.55)
  assert caplog.records[-1].getMessage().startswith(
      'step 10/10 (100%) train loss (label-smoothed) 0.5500 ')


def test_the_final_line_rounds_while_metrics_json_keeps_every_digit(
    tmp_path, caplog):
  """Issue 47, item 5: float32's noise (0.9185000061988831) was printed."""
  accuracy = float(np.float32(0.9185))
  assert accuracy != 0.9185  # The noise this is about.
  with caplog.at_level(logging.INFO, logger=outputs.__name__):
    outputs.write_eval_metrics(str(tmp_path), {
        'accuracy': np.float32(0.9185), 'average_loss': np.float32(2790.25),
        'loss': np.float32(0.5), 'global_step': np.int64(938)})
  line, = [r.getMessage() for r in caplog.records
           if r.getMessage().startswith('Final evaluation')]
  assert line.endswith("{'accuracy': 0.9185, 'average_loss': 2790.25, "
                       "'batch_mean_loss': 0.5, 'global_step': 938, "
                       "'loss': 2790.25}")
  written = json.loads((tmp_path / 'metrics.json').read_text())
  assert written['accuracy'] == accuracy
