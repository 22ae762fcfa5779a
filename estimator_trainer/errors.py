"""Errors the CLI turns into one-line messages and exit codes."""


class TrainerError(Exception):
  """A runtime failure the user can act on (bad data file, no checkpoint...).

  The CLI prints it as one line and exits 1.
  """

  exit_code = 1


class UsageError(TrainerError):
  """Invalid flags or configuration. The CLI exits 2."""

  exit_code = 2


class DataError(TrainerError):
  """A data source is missing, unreachable or malformed."""
