"""The statistics of tabular preprocessing, one pass whose flow goes one
way: read and summarise a split's files (scan.py, into a SplitSummary of
mergeable summaries: split_summary.py, summaries.py) -> merge the shares of
a cluster's trainers (shares.py) or of Beam's workers (beam_transforms.py)
-> finalize (finalize.py: the Statistics, types.py) -> store and read back
(storage.py, with the record of the training files: training_files.py).
load.py runs the pass for a run. No module here imports one after it in
that flow, and none below the package imports the package.

A new summary (a sketch, say) is a class in summaries.py with add, merge,
result, to_dict and from_dict (a mergeable combiner, as tf.Transform's
analyzers are); split_summary.py holds one per column that needs it,
finalize.py reads its result into a ColumnStatistics field (types.py), and
summaries.FORMAT changes, so that no share stored before is merged.

Callers read the pass's results here as a whole."""

# pylint: disable=unused-import
from estimator_trainer.tabular.statistics.finalize import compute, of_summary
from estimator_trainer.tabular.statistics.load import load_or_compute
from estimator_trainer.tabular.statistics.storage import (read, remove_stale,
                                                        store, usable)
from estimator_trainer.tabular.statistics.types import (ColumnStatistics,
                                                        Statistics,
                                                        differences)
