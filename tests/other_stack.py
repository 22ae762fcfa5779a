"""For a test's script run by the other stack's Python (OTHER_STACK_PYTHON):
the CLI in that process, as `python -m estimator_trainer.run` runs it, one
TensorFlow import for several runs."""

from absl import app, flags

from estimator_trainer import errors, run


def cli(*args):
  """`run ARGS` through app.run and run.main; a failure raises SystemExit."""
  # The last run's flags back to their defaults (all of them would reset
  # --verbosity's logging level too).
  for name in list(flags.FLAGS):
    if flags.FLAGS[name].present:
      flags.FLAGS[name].unparse()
  try:
    app.run(run.main, argv=['run', *args], flags_parser=errors.parse_flags)
  except SystemExit as e:
    if e.code:
      raise
