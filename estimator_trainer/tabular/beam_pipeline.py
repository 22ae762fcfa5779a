"""What the package's Beam commands (beam_statistics.py, beam_scoring.py)
share: Beam's options from the words after `--`, and a pipeline run whose
worker's DataError or UsageError is the command's one line again."""

import re

import apache_beam as beam

from estimator_trainer import errors

# A package error as a worker process's runner relays it: in the text of a
# RuntimeError, the worker's whole traceback.
_WORKER_ERROR = re.compile(
    r'^estimator_trainer\.errors\.(DataError|UsageError): (.+)$', re.M)


def worker_error(error):
  """The DataError or UsageError a worker raised, from the `error` the
  runner raised here; None if it relays none."""
  found = _WORKER_ERROR.findall(str(error))
  if not found:
    return None
  kind, message = found[-1]
  return getattr(errors, kind)(message)


def options(beam_args):
  """Beam's PipelineOptions of the command line's words after `--`."""
  return beam.options.pipeline_options.PipelineOptions(
      [arg for arg in beam_args if arg != '--'])


def run(pipeline_options, build):
  """Builds a pipeline with `build(pipeline)` and runs it to its end."""
  try:
    with beam.Pipeline(options=pipeline_options) as pipeline:
      build(pipeline)
  except errors.TrainerError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    error = worker_error(e)
    if error is None:
      raise
    raise error from None
