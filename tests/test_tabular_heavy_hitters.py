"""A vocabulary past the tracked-values cap (summaries.Counts, issue 71
item 2): the most frequent values within the stated error, across many
batches and across merged shares, checked against exact counts
(collections.Counter)."""

import collections
import json

import numpy as np

from estimator_trainer import sources
from estimator_trainer.tabular import arrow_csv
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular import statistics
from estimator_trainer.tabular.statistics import summaries
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.spec import Column, FeatureSpec


def test_the_review_case_keeps_the_hot_values_across_batches(
    tmp_path, monkeypatch, caplog):
  """The review's case at 1/1000 scale: a cap of 1,000 distinct values,
  batches of about 100 rows, `zhot` 30 times, `zwarm` 10, 7,960 ids once
  each, `max_vocabulary` 5; the hot values start after the first 1,500
  rows (as a new product's in time-ordered data), `zwarm` every 600 rows:
  pruning that keeps the values seen first drops it at every prune."""
  monkeypatch.setattr(summaries, 'MAX_TRACKED', 1000)
  monkeypatch.setattr(arrow_csv, '_BLOCK', 1000)  # About 100 rows.
  values = [f'id{i}' for i in range(7960)]
  hot = sorted([(1500 + 200 * i, 'zhot') for i in range(30)] +
               [(1500 + 600 * i, 'zwarm') for i in range(10)])
  for row, value in hot:
    values.insert(row, value)
  path = tmp_path / 'train.csv'
  path.write_text('c,y\n' + ''.join(f'{v},{i % 2}\n'
                                    for i, v in enumerate(values)))
  spec = FeatureSpec((Column('c', 'string_categorical', max_vocabulary=5),),
                     'y', head='binary')
  source = TabularSource({sources.TRAIN: str(path),
                          sources.TEST: str(path)}, spec)
  summary = scan.summarise(source, sources.TRAIN)
  counts = summary.counts['c']
  vocabulary = statistics.of_summary(spec, summary).columns['c'].vocabulary
  print('vocabulary', vocabulary, 'zhot', counts.counts.get('zhot'),
        'zwarm', counts.counts.get('zwarm'), 'error', counts.error)
  assert len(vocabulary) == 5 and vocabulary[:2] == ('zhot', 'zwarm')
  # Misra-Gries' bound: at most total / (counters kept + 1) under.
  assert 0 < counts.error <= len(values) / (1000 // 2 + 1)
  _assert_within(counts, collections.Counter(values))
  assert (f"Column 'c' has more than 1000 distinct values: its counts are "
          f'at most {counts.error} under the true ones') in caplog.text


def test_a_zipf_column_over_8_merged_shares_is_within_the_error(
    monkeypatch):
  """200,000 integer values (Zipf, a=1.2) in 8 shares of batches of 1,000,
  each share stored (as JSON) and merged as a cluster's chief does."""
  monkeypatch.setattr(summaries, 'MAX_TRACKED', 1000)
  values = np.random.default_rng(8).zipf(1.2, 200_000)
  shares = []
  for share in np.array_split(values, 8):
    counts = summaries.Counts()
    for batch in np.array_split(share, len(share) // 1000):
      counts.add(batch)
    shares.append(summaries.Counts.from_dict(json.loads(json.dumps(
        counts.to_dict()))))
  merged = shares[0]
  for share in shares[1:]:
    merged.merge(share)
  exact = collections.Counter(values.tolist())
  assert len(exact) > 10 * 1000  # Well past the cap.
  assert 0 < merged.error <= values.size / (1000 // 2 + 1)
  _assert_within(merged, exact)
  vocabulary = merged.vocabulary(max_size=50)
  assert all(type(value) is int for value in vocabulary)  # pylint: disable=unidiomatic-typecheck
  # The i-th value's true count is within the error of the i-th largest.
  top = [count for _, count in exact.most_common(50)]
  for value, wanted in zip(vocabulary, top):
    assert abs(exact[value] - wanted) <= merged.error, (value, wanted)
  print('error', merged.error, 'distinct', len(exact), 'top', top[:3])


def test_counts_under_the_cap_are_exact():
  values = np.random.default_rng(0).zipf(1.5, 5000)
  counts = summaries.Counts()
  for batch in np.array_split(values, 50):
    counts.merge(summaries.Counts()).add(batch)
  assert counts.error == 0 and not counts.pruned
  assert counts.counts == collections.Counter(values.tolist())


def _assert_within(counts, exact):
  """Every count of `counts` is at most its `error` under the exact one,
  never over, and every value counted more than `error` times is kept."""
  for value, count in counts.counts.items():
    assert exact[value] - counts.error <= count <= exact[value], value
  kept = {value for value, count in exact.items() if count > counts.error}
  assert kept <= set(counts.counts)
