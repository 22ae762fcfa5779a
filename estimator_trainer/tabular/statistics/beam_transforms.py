"""The Beam pipeline of the tabular statistics (tabular/beam_statistics.py
is its command line): each training file summarised on a worker (the same
streaming pass as in-process, scan.py), the summaries merged in a CombineFn,
the Statistics stored in model_dir. In a module of its own, importable: a
runner pickles the transforms by reference to their module, which every
worker imports (a class of `python -m`'s __main__ is not found there).
"""

import apache_beam as beam

from estimator_trainer import sources
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.statistics import finalize
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular.statistics import split_summary
from estimator_trainer.tabular.statistics import storage
from estimator_trainer.tabular.statistics import summaries


class SummariseFile(beam.DoFn):
  """(place, path) of a training file -> (place, its SplitSummary). Reads
  that file alone: its header (checked), its records, and the first file's
  header, by which the training parser places columns."""

  def __init__(self, source_args, head):
    super().__init__()
    self._source_args, self._head = source_args, head

  def setup(self):
    patterns, feature_spec, kwargs = self._source_args
    self._source = TabularSource(patterns, feature_spec, **kwargs)

  def process(self, element):
    place, path = element
    yield place, scan.summarise(self._source, sources.TRAIN, self._head,
                                [path], progress=False)


class MergeSummaries(beam.CombineFn):
  """(place, SplitSummary) of files merged into one SplitSummary in the
  files' order while they hold at most summaries.EXACT_VALUES rows: their
  exact values then concatenate as in-process, and the mean and variance
  of them are its bit for bit, whatever order the workers finish in. Past
  that (moments, sketches: no bit-for-bit result) they merge as they
  come."""

  def __init__(self, feature_spec, head):
    super().__init__()
    self._feature_spec, self._head = feature_spec, head

  def create_accumulator(self):
    return []  # (place, SplitSummary), by place.

  def add_input(self, mutable_accumulator, element):
    mutable_accumulator.append(element)
    return self._bounded(mutable_accumulator)

  def merge_accumulators(self, accumulators):
    return self._bounded([item for accumulator in accumulators
                          for item in accumulator])

  def _bounded(self, items):
    items.sort(key=lambda item: item[0])
    if len(items) > 1 and sum(summary.rows for _, summary in items) > (
        summaries.EXACT_VALUES):
      return [(items[0][0], self.extract_output(items))]
    return items

  def extract_output(self, accumulator):
    merged = split_summary.SplitSummary(self._feature_spec, self._head)
    for _, summary in accumulator:
      merged.merge(summary)
    return merged


def _statistics(summary, feature_spec):
  return finalize.of_summary(feature_spec, summary)


def _store(stats, model_dir, feature_spec, files):
  storage.store(model_dir, feature_spec, stats, files)


def compute(pipeline, source_args, head=None):
  """A PCollection of the one Statistics of the training split of the
  TabularSource made of `source_args` (patterns, feature_spec, keyword
  arguments)."""
  patterns, feature_spec, kwargs = source_args
  files = TabularSource(patterns, feature_spec, **kwargs).files(sources.TRAIN)
  return (pipeline
          | 'Files' >> beam.Create(list(enumerate(files)))
          | 'Reshuffle' >> beam.Reshuffle()
          | 'Summarise' >> beam.ParDo(SummariseFile(source_args, head))
          | 'Merge' >> beam.CombineGlobally(MergeSummaries(feature_spec, head))
          | 'Statistics' >> beam.Map(_statistics, feature_spec))


def store(pipeline, model_dir, source_args, files, head=None):
  """`compute`, its Statistics stored in model_dir with `files`, the record
  of the training files (training_files.of)."""
  return (compute(pipeline, source_args, head)
          | 'Write' >> beam.Map(_store, model_dir, source_args[1], files))
