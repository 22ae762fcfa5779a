"""A float_discretized column's bins (issue 71 item 3): repeated quantiles
merged, a value many rows share a bin of its own, said once; given
boundaries as given; statistics stored before still load."""

import logging

import numpy as np
import pytest

from estimator_trainer.tabular import statistics
from estimator_trainer.tabular.statistics import summaries
from estimator_trainer.tabular.encoder import Encoder
from estimator_trainer.tabular.spec import Column, FeatureSpec
from estimator_trainer.tabular.statistics.types import (ColumnStatistics,
                                                        Statistics,
                                                        differences)

ROWS = 10_000


def _zeros_column():
  """92 % zeros, the rest 1.0 to 100.0 (float32 values, as parsed)."""
  rng = np.random.default_rng(92)
  values = np.where(rng.random(ROWS) < 0.92, 0.0,
                    rng.uniform(1, 100, ROWS)).astype(np.float32)
  return values.astype(np.float64)


def _spec(**column):
  return FeatureSpec((Column('x', 'float_discretized', **column),), 'y',
                     head='binary')


@pytest.mark.parametrize('exact', [True, False], ids=['exact', 'sketch'])
def test_a_column_of_92_percent_zeros_has_bins_that_tell_values_apart(
    monkeypatch, caplog, exact):
  if not exact:  # The KLL sketch's boundaries past the exact size.
    monkeypatch.setattr(summaries, 'EXACT_VALUES', 100)
  values = _zeros_column()
  spec = _spec(num_bins=4)
  with caplog.at_level(logging.WARNING):
    stats = statistics.compute(spec, {'x': values,
                                      'y': np.zeros(ROWS, np.int64)})
  boundaries = np.array(stats.columns['x'].boundaries)
  print('boundaries', boundaries.tolist())
  assert np.all(np.diff(boundaries) > 0), boundaries
  # Discretization's bins: a value goes above every boundary <= it.
  bins = np.searchsorted(boundaries, values, side='right')
  zero_bins = set(bins[values == 0].tolist())
  assert len(zero_bins) == 1 and len(set(bins.tolist())) == 2
  # The zeros' bin holds no other value (the sketch's: within its error).
  others = np.mean((bins == zero_bins.pop()) & (values != 0))
  assert others <= (0 if exact else summaries.rank_error()), others
  assert len(boundaries) + 1 == 3  # Nothing is below 0: its bin is empty.
  lines = [r.getMessage() for r in caplog.records if "'x'" in r.getMessage()]
  assert lines == ["Column 'x' has 3 bins, not the 4 asked: values that "
                   'many rows share repeat quantiles (each of them a bin of '
                   'its own)']
  # The model's ids: as many as the bins, zeros apart from the rest.
  encoder = Encoder(spec, stats, labels=False)
  assert encoder.inputs['x'].cardinality == 3
  ids = encoder._encode(spec.columns[0], values.astype(np.float32)).numpy()  # pylint: disable=protected-access
  np.testing.assert_array_equal(ids, bins)


def test_given_boundaries_and_distinct_quantiles_are_as_they_were(caplog):
  values = _zeros_column()
  columns = {'x': values, 'y': np.zeros(ROWS, np.int64)}
  given = statistics.compute(_spec(boundaries=(0.0, 0.5)), columns)
  assert given.columns['x'].boundaries == (0.0, 0.5)
  present = values[values > 0]
  spread = statistics.compute(_spec(num_bins=5), {'x': present, 'y':
                                                  np.zeros(present.size)})
  assert spread.columns['x'].boundaries == tuple(
      np.quantile(present, [0.2, 0.4, 0.6, 0.8]))
  assert 'bins, not the' not in caplog.text


def test_statistics_stored_with_repeated_boundaries_load_and_compare():
  """A model_dir's statistics of an earlier version keep their 4 bins (its
  checkpoint's); a resumed chief's comparison with the new 3 says so."""
  stored = Statistics.from_json(Statistics(
      {'x': ColumnStatistics(boundaries=(0.0, 0.0, 0.0), fill=0.0)},
      ROWS).to_json())
  spec = _spec(num_bins=4)
  assert Encoder(spec, stored, labels=False).inputs['x'].cardinality == 4
  fresh = Statistics({'x': ColumnStatistics(boundaries=(0.0, 1.0),
                                            fill=0.0)}, ROWS)
  assert differences(stored, fresh) == ["'x' 4 bins now 3"]
  assert differences(fresh, fresh) == []
