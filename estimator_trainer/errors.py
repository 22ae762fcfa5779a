"""Errors the CLI turns into one-line messages and exit codes."""

import contextlib
import logging
import sys

from absl import flags

_logger = logging.getLogger(__name__)


class TrainerError(Exception):
  """A runtime failure the user can act on (bad data file, no checkpoint...).

  The CLI prints it as one line and exits 1.
  """

  exit_code = 1


class UsageError(TrainerError):
  """Invalid flags or configuration. The CLI exits 2."""

  exit_code = 2


class ModelDirInUse(UsageError):
  """Another training run holds the model_dir (run_lock.py): nothing in it
  is this run's, to write or to remove."""


class DataError(TrainerError):
  """A data source is missing, unreachable or malformed."""


class Interrupted(KeyboardInterrupt):
  """Ctrl-C stopped training, which saved its step and said so in a line
  (stop_signals.stopped). A KeyboardInterrupt to a caller of the Python API; the
  CLI exits 130, with no more words."""


def first_line(error):
  """The line of an error that says what went wrong: its first, or the
  failed assertion of a data check from its start (TensorFlow's own first
  line is then "Graph execution error:"; TensorFlow 2.21 puts tf.data's
  iterator before it on its line)."""
  lines = [line.strip() for line in str(error).strip().splitlines()] or ['']
  failed = 'assertion failed:'
  return next((line[line.index(failed):] for line in lines if failed in line),
              lines[0])


# What a command's last line starts with when it fails (fail); a parent
# that runs a command reads its message after it.
PREFIX = 'error: '


def fail(code, message):
  """Ends a command line program: `error: <message>` on stderr, exit `code`."""
  print(f'{PREFIX}{message}', file=sys.stderr)
  sys.exit(code)


# As a shell reports a process that SIGINT ended.
INTERRUPTED_EXIT_CODE = 130


@contextlib.contextmanager
def reported():
  """A command line program's body: an error ends it as one line on stderr,
  a TrainerError with its exit code, anything else with 1 (no traceback for
  users; --verbosity=1 logs it); a Ctrl-C with 130 (training said what it
  saved)."""
  try:
    yield
  except Interrupted:
    sys.exit(INTERRUPTED_EXIT_CODE)
  except KeyboardInterrupt:
    fail(INTERRUPTED_EXIT_CODE, 'interrupted')
  except TrainerError as e:
    fail(e.exit_code, str(e))
  except Exception as e:  # pylint: disable=broad-except
    _logger.debug('Failure', exc_info=True)
    fail(TrainerError.exit_code, f'{type(e).__name__}: {first_line(e)}')


def parse_flags(argv):
  """absl's flag parsing for `app.run(flags_parser=...)`: a bad flag is a
  one-line usage error (exit 2) instead of absl's usage dump."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    fail(UsageError.exit_code, str(e))
