"""What the package's Beam commands (beam_statistics.py, beam_scoring.py)
share: the start of their argument parser, Beam's options from the words
after `--`, and a pipeline run whose worker's DataError or UsageError is the
command's one line again.

Beam's own options pick the runner: none (DirectRunner, here), or e.g.
`--runner=DataflowRunner --project=P --region=R --temp_location=gs://...`,
`--runner=FlinkRunner --flink_master=HOST:PORT`, `--runner=SparkRunner`.
Both commands need the `beam` extra (pip install estimator-trainer[beam]).
Exit codes: 0, 1 data error, 2 usage error.
"""

import argparse
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


def parser(module, doc):
  """The argument parser of `python -m MODULE`, described by the first line
  of its docstring `doc`."""
  return argparse.ArgumentParser(prog=f'python -m {module}',
                                 description=doc.split('\n', 1)[0])


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
