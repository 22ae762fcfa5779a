"""Training progress a person can follow: a tqdm bar on a terminal, periodic
plain log lines otherwise (CI, log files)."""

import logging
import sys
import time

from absl import logging as absl_logging
import tqdm
from tqdm import contrib as tqdm_contrib

_logger = logging.getLogger(__name__)


def _duration(seconds):
  minutes, seconds = divmod(int(seconds), 60)
  hours, minutes = divmod(minutes, 60)
  return f'{hours}h{minutes:02d}m' if hours else f'{minutes}m{seconds:02d}s'


def loss_name(hparams):
  """What the progress line's loss is, from a run's HParams
  (hparams.run_hparams): the training objective, which evaluation's plain
  loss can be well below (label smoothing 0.1 keeps a 10-class loss above
  ~0.5), so the line says what it adds."""
  terms = []
  if hparams['label_smoothing'] and hparams['head'] == 'multiclass':
    terms.append('label-smoothed')
  if hparams['weight_decay']:
    terms.append('with L2')
  return 'train loss' + (f' ({", ".join(terms)})' if terms else '')


class Progress:
  """Step, loss (named `loss_name`), examples/s and ETA of a run to
  `max_steps`."""

  def __init__(self, max_steps, global_batch_size, loss_name='train loss',
               stream=None, every_secs=10.0):
    self._max_steps = max_steps
    self._loss_name = loss_name
    self._global_batch_size = global_batch_size
    self._stream = stream or sys.stderr
    self._every_secs = every_secs
    self._bar = None
    self._log_stream = None
    self._start = None  # (step, time) after the first step.
    self._last = None  # (step, time) of the last display.

  def update(self, step, loss):
    now = time.monotonic()
    if self._start is None:  # The first step includes tracing: not timed.
      self._start = self._last = (step, now)
      if self._stream.isatty():
        self._bar = tqdm.tqdm(total=self._max_steps, initial=step,
                              unit='step', file=self._stream,
                              dynamic_ncols=True)
        # Log lines go through tqdm, above the bar, instead of breaking it.
        handler = absl_logging.get_absl_handler().python_handler
        self._log_stream = handler.stream
        handler.stream = tqdm_contrib.DummyTqdmFile(self._log_stream)
      return
    if step == self._last[0]:
      return
    final = step >= self._max_steps
    if now - self._last[1] < (1.0 if self._bar else self._every_secs) and (
        not final):
      return
    # examples/s over the last interval; the ETA from the whole run, which
    # includes the pauses for evaluation.
    examples_per_second = ((step - self._last[0]) * self._global_batch_size /
                           (now - self._last[1]))
    self._last = (step, now)
    if self._bar is not None:
      self._bar.set_postfix({self._loss_name: f'{loss:.4f}',
                             'examples_per_s': f'{examples_per_second:,.0f}'},
                            refresh=False)
      self._bar.update(step - self._bar.n)
      return
    steps_per_second = (step - self._start[0]) / (now - self._start[1])
    eta = (self._max_steps - step) / steps_per_second
    _logger.info('step %d/%d (%.0f%%) %s %.4f %s examples/s ETA %s',
                 step, self._max_steps, 100 * step / self._max_steps,
                 self._loss_name, loss,
                 f'{examples_per_second:,.0f}', _duration(eta))

  def close(self):
    if self._bar is not None:
      self._bar.close()
      absl_logging.get_absl_handler().python_handler.stream = self._log_stream
      self._bar = None
