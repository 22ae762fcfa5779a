"""The benchmark's splits of its real tables (benchmark/real_tables.py):
another seed draws other evaluation rows of the same table, and the
default is the seed the published figures were measured at."""

import pytest

from estimator_trainer.benchmark import real_tables

# The tables come as DataFrames; the TensorFlow 2.21 stack has no pandas.
pd = pytest.importorskip('pandas')


def test_a_split_seed_draws_another_partition_of_the_same_rows():
  table = real_tables.frame('wine')
  default = real_tables.split('wine')
  assert all(a.equals(b) for a, b in
             zip(default, real_tables.split('wine', real_tables.SEED)))
  train, test = real_tables.split('wine', seed=1)
  assert (len(train), len(test)) == tuple(len(part) for part in default)
  assert not test.equals(default[1])
  rows = lambda frame: sorted(map(tuple, frame.astype(str).values.tolist()))
  assert rows(pd.concat([train, test])) == rows(table)
