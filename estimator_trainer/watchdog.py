"""Bounded waits: a cluster that cannot make progress fails, never hangs."""

import os
import sys
import threading
import time

from absl import logging
import tensorflow as tf


class Watchdog:
  """Ends the process with exit code 1 if not kicked for `timeout_secs`.

  TensorFlow blocks inside C++ while it waits for a missing peer (collective
  all-reduce, session creation), where no Python exception can reach it, so
  the watchdog exits the process itself, after printing one line.
  """

  def __init__(self, timeout_secs, message):
    self._timeout = timeout_secs
    self._message = message
    self._last_kick = time.monotonic()
    self._stopped = threading.Event()
    threading.Thread(target=self._watch, daemon=True, name='watchdog').start()

  def kick(self):
    self._last_kick = time.monotonic()

  def stop(self):
    self._stopped.set()

  def _watch(self):
    while not self._stopped.wait(min(1.0, self._timeout / 10)):
      if time.monotonic() - self._last_kick > self._timeout:
        logging.error('Watchdog: %s', self._message)
        print(f'error: {self._message}', file=sys.stderr, flush=True)
        os._exit(1)  # pylint: disable=protected-access


class WatchdogHook(tf.estimator.SessionRunHook):
  """Kicks the watchdog after every training step."""

  def __init__(self, watchdog):
    self._watchdog = watchdog

  def after_run(self, run_context, run_values):
    self._watchdog.kick()
