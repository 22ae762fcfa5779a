"""A command line run in-process: its TrainConfig, through the CLI's own
flag handling (its --config file and the model_dir's record of its run),
the whole of run.main with its error reporting, or TensorFlow's
`saved_model_cli run`. Each spares a test a process's TensorFlow import
(~3 CPU-seconds) where the real process adds nothing the test reads."""

import logging
import os
import sys
import warnings

from absl import flags
# saved_model_cli's run command (defines its flags).
from tensorflow.python.tools import saved_model_cli

# Importing run defines the CLI's flags.
from estimator_trainer import config_flags, run  # pylint: disable=unused-import
from estimator_trainer import engines
from estimator_trainer import errors


def config_from(argv):
  flags.FLAGS.unparse_flags()
  flags.FLAGS(['run', *argv])
  try:
    return config_flags.config_from_flags()
  finally:
    flags.FLAGS.unparse_flags()


def run_in_process(argv):
  """`run ARGV` in this process, as run.main runs it but for its console
  set-up; returns the TrainConfig it ran."""
  config = config_from(argv)
  engines.ENGINES[config.engine].run(config)
  return config


def main_in_process(argv, capfd, env=None):
  """`python -m estimator_trainer.run ARGV` in this process, run.main and
  its error reporting, under `env`'s variables too: (exit code, stderr).
  The global state a run sets (flags, TensorFlow's and absl's log filters,
  warnings filters, the variables) is put back."""
  env = env or {}
  loggers = [logging.getLogger(name) for name in ('tensorflow', 'absl')]
  filters = [list(logger.filters) for logger in loggers]
  saved_env = {name: os.environ.get(name) for name in env}
  os.environ.update(env)
  capfd.readouterr()
  flags.FLAGS.unparse_flags()
  try:
    with warnings.catch_warnings():
      run.main(errors.parse_flags(['run', *argv]))
    code = 0
  except SystemExit as e:
    code = e.code
  finally:
    flags.FLAGS.unparse_flags()
    for logger, kept in zip(loggers, filters):
      logger.filters[:] = kept
    for name, value in saved_env.items():
      if value is None:
        os.environ.pop(name, None)
      else:
        os.environ[name] = value
  sys.stderr.flush()
  return code, capfd.readouterr().err


def saved_model_cli_run(*args):
  """`saved_model_cli run ARGS` in this process: its run command on its
  flags parsed (the tool as a process is docs/guide/export.md's example,
  which test_docs runs)."""
  flags.FLAGS.unparse_flags()
  flags.FLAGS(['saved_model_cli', *map(str, args)])
  try:
    saved_model_cli.run()
  finally:
    flags.FLAGS.unparse_flags()
