"""The Python re-read of a file the fast readers refuse (issue 71, item 7)
streams: a chunk of records at a time, so a bad value in a file's last
line costs the memory of a chunk, not of the file (1M census-like rows
took 1.88 GB, the file in Python lists; `python -m
estimator_trainer.benchmark.statistics_pass --unreadable_as_missing`
measures it), and it still names the place and equals the whole read."""

import logging

import numpy as np
import pytest

from estimator_trainer import sources
from estimator_trainer.errors import DataError
from estimator_trainer.tabular import numpy_columns
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular import statistics
from estimator_trainer.tabular import table
from estimator_trainer.tabular import table_cells
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.spec import Column, FeatureSpec

TRAIN, TEST = sources.TRAIN, sources.TEST
ROWS, CHUNK = 1000, 64
SPEC = FeatureSpec((Column('x', 'float_normalized'),
                    Column('color', 'string_categorical')), 'y',
                   head='binary')


def _rows(bad):
  rows = [{'x': float(i % 17), 'color': f'c{i % 5}', 'y': i % 2}
          for i in range(ROWS)]
  rows[-1].update(bad)
  return rows


def _write(tmp_path, file_format, bad):
  rows = _rows(bad)
  if file_format == 'csv':
    path = tmp_path / 'train.csv'
    path.write_bytes(b'\n'.join([b'x,color,y'] + [
        table.csv_line(('x', 'color', 'y'), row) for row in rows]) + b'\n')
  else:
    path = tmp_path / 'train.tfrecord'
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.io.TFRecordWriter(str(path)) as writer:
      for row in rows:
        writer.write(table.example(row))
  return str(path)


@pytest.fixture
def largest_chunk(monkeypatch):
  """The most rows the Python read held at once (typed, or failed on), with
  chunks of CHUNK."""
  monkeypatch.setattr(numpy_columns, 'CHUNK_ROWS', CHUNK)
  sizes = []
  for name in ('typed', 'fail'):
    def spy(cells, *args, method=getattr(table_cells.Cells, name)):
      sizes.append(len(cells.numbers))
      return method(cells, *args)
    monkeypatch.setattr(table_cells.Cells, name, spy)
  return lambda: max(sizes)


@pytest.mark.parametrize('file_format', ['csv', 'tfrecord'])
def test_a_bad_last_value_is_read_a_chunk_at_a_time(tmp_path, file_format,
                                                    largest_chunk, caplog):
  # A number that is none (CSV) / a string where a number belongs (TFRecord):
  # the fast readers refuse the file, the Python read counts it missing.
  bad = {'x': 'oops'}
  path = _write(tmp_path, file_format, bad)
  source = TabularSource({TRAIN: path, TEST: path}, SPEC,
                         unreadable_as_missing=file_format == 'csv')
  if file_format == 'tfrecord':
    with pytest.raises(DataError, match=rf"^{path} record {ROWS}, column 'x': "
                       r"'oops' is not a number$"):
      scan.summarise(source, TRAIN, progress=False)
    assert largest_chunk() <= CHUNK  # Without chunks: 1,000.
    return
  with caplog.at_level(logging.WARNING):
    summary = scan.summarise(source, TRAIN, progress=False)
  assert largest_chunk() == CHUNK  # Without chunks: 1,000.
  assert summary.rows == ROWS
  assert [r.getMessage() for r in caplog.records if 'no numbers' in
          r.getMessage()] == [
              f"1 cells of column 'x' in {path} are no numbers, read as "
              "missing (--unreadable_as_missing); the first: 'oops', "
              f'{path} line {ROWS + 1}']
  # Equal to the rows written, the bad cell left out.
  x = np.array([row['x'] for row in _rows({})[:-1]], np.float64)
  stats = statistics.of_summary(SPEC, summary).columns
  np.testing.assert_allclose([stats['x'].mean, stats['x'].variance],
                             [x.mean(), x.var()], rtol=1e-6)
  assert sorted(stats['color'].vocabulary) == [f'c{i}' for i in range(5)]


@pytest.mark.parametrize('file_format', ['csv', 'tfrecord'])
def test_chunks_name_the_bad_place_and_join_to_the_whole(tmp_path,
                                                         file_format):
  path = _write(tmp_path, file_format, {'y': 7})  # Not 0 or 1.
  source = TabularSource({TRAIN: path, TEST: path}, SPEC)
  unit = 'line' if file_format == 'csv' else 'record'
  place = ROWS + 1 if file_format == 'csv' else ROWS
  with pytest.raises(DataError, match=rf"^{path} {unit} {place}, column 'y': "
                     r"label '?7'? is not 0 or 1 \(the binary head\)$"):
    list(sources.eagerly(lambda: list(numpy_columns.chunks(
        source, TRAIN, None, CHUNK))))
  good = _write(tmp_path, file_format, {})
  source = TabularSource({TRAIN: good, TEST: good}, SPEC)
  parts = sources.eagerly(lambda: list(numpy_columns.chunks(
      source, TRAIN, None, CHUNK)))
  assert [len(part['y']) for part in parts] == (
      [CHUNK] * (ROWS // CHUNK) + [ROWS % CHUNK])
  whole = source.columns(TRAIN)
  for name, values in whole.items():
    np.testing.assert_array_equal(
        np.concatenate([part[name] for part in parts]), values)
