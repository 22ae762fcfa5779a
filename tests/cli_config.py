"""The TrainConfig of a command line, through the CLI's own flag handling
(its --config file and the model_dir's record of its run), in-process."""

from absl import flags

# Importing run defines the CLI's flags.
from estimator_trainer import config_flags, run  # pylint: disable=unused-import
from estimator_trainer import engines


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
