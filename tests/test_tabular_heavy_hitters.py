"""A vocabulary past the tracked-values cap (summaries.Counts, issue 71
item 2): the most frequent values within the stated error, across many
batches and across merged shares, checked against exact counts
(collections.Counter)."""

import collections
import json

import numpy as np
import pytest

from estimator_trainer import layout
from estimator_trainer import sources
from estimator_trainer.tabular import arrow_csv
from estimator_trainer.tabular import statistics
from estimator_trainer.tabular.statistics import finalize
from estimator_trainer.tabular.statistics import scan
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


def _zipf_files(directory, rows, universe, files):
  """Writes `files` CSV files of `rows` records in all, `item,y`: item one
  of `universe` values ('i' and 7 digits; the i-th most likely, i >= 1,
  drawn with probability proportional to 1 / i: Zipf's law, exponent 1) in
  a shuffled order, y 0 or 1. Returns the glob and each value's count."""
  rng = np.random.default_rng(71)
  likelihood = 1.0 / np.arange(1, universe + 1)
  counts = rng.multinomial(rows, likelihood / likelihood.sum())
  # The most frequent values are not the smallest: order by value differs
  # from order by count.
  values = rng.permutation(universe).astype(np.int32)
  items = np.repeat(values, counts)
  rng.shuffle(items)
  # Each line as 3 little-endian uint32s of text: 'i' and 3 digits, 4
  # digits, ',y\r\n' (CRLF lines), gathered from small tables: a second,
  # where formatting 10M numbers in Python takes a minute.
  def table(pattern, size):
    return np.frombuffer(b''.join(pattern % i for i in range(size)), '<u4')
  lines = np.stack([table(b'i%03d', 1000)[items // 10_000],
                    table(b'%04d', 10_000)[items % 10_000],
                    table(b',%d\r\n', 2)[rng.integers(0, 2, rows)]], axis=1)
  for index, part in enumerate(np.array_split(lines, files)):
    (directory / f'train-{index}.csv').write_bytes(b'item,y\r\n' +
                                                   part.tobytes())
  # The values drawn, named as the lines name them, from the same tables.
  drawn = counts > 0
  names = np.stack([table(b'i%03d', 1000)[values[drawn] // 10_000],
                    table(b'%04d', 10_000)[values[drawn] % 10_000]], axis=1)
  return str(directory / 'train-*.csv'), dict(zip(
      names.view('S8').ravel().astype('U8').tolist(),
      counts[drawn].tolist()))


# The package's counting at scale, no TensorFlow: the default stack's
# (the quick tests above run the same code on both stacks' numpy and Arrow).
@pytest.mark.slow
@pytest.mark.default_stack_only
def test_a_zipf_column_of_10m_values_in_8_files_is_within_the_error(
    tmp_path, monkeypatch, caplog):
  """Production size and cap (issue 71's acceptance): 10,000,000 values of
  a Zipf-distributed string column over 2**23 possible values (1.87M
  distinct: past MAX_TRACKED, pruned more than once) in 8 CSV files,
  through the whole pass (load_or_compute: Arrow's reader, its batches,
  the files' summaries merged, finalize, store); every kept count and the
  stored top 100 checked against the exact counts."""
  pattern, exact = _zipf_files(tmp_path, 10_000_000, 1 << 23, 8)
  assert len(exact) > summaries.MAX_TRACKED
  spec = FeatureSpec((Column('item', 'string_categorical',
                             max_vocabulary=100),), 'y', head='binary')
  source = TabularSource({sources.TRAIN: pattern,
                          sources.TEST: str(tmp_path / 'train-0.csv')}, spec)
  merged = []  # The summary finalize gets: its counts and error.
  of_summary = finalize.of_summary
  monkeypatch.setattr(finalize, 'of_summary', lambda spec, summary: (
      merged.append(summary), of_summary(spec, summary))[1])
  statistics.load_or_compute(str(tmp_path / 'model'), spec, source)
  stored = statistics.read(layout.statistics_file(str(tmp_path / 'model')))
  counts = merged[0].counts['item']
  print('distinct', len(exact), 'kept', len(counts.counts), 'error',
        counts.error, 'bound', 10_000_000 // (summaries.MAX_TRACKED // 2 + 1),
        'top', sorted(exact.values())[-3:])
  assert stored.num_examples == 10_000_000
  assert 0 < counts.error <= 10_000_000 / (summaries.MAX_TRACKED // 2 + 1)
  _assert_within(counts, exact)
  # The i-th stored value's true count is within the error of the i-th
  # largest: the vocabulary is of the most frequent, as the warning says.
  vocabulary = stored.columns['item'].vocabulary
  top = sorted(exact.values(), reverse=True)[:100]
  assert len(vocabulary) == 100
  for value, wanted in zip(vocabulary, top):
    assert abs(exact[value] - wanted) <= counts.error, (value, wanted)
  assert (f"Column 'item' has more than {summaries.MAX_TRACKED} distinct "
          f'values: its counts are at most {counts.error} under the true '
          f'ones (never over), so every value counted more than '
          f'{counts.error} times is kept') in caplog.text


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
