"""One rule for a CSV cell of a number column (issue 71, item 1) in every
reader: infer, the statistics pass (Arrow's, TensorFlow's and Python's
reads) and training's parser. A cell is a missing value (pandas'
read_csv list), a number as TensorFlow reads it, or an error naming it
(with unreadable_as_missing: missing, and counted); a line holds one
record."""

import dataclasses
import logging

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import sources
from estimator_trainer.errors import DataError
from estimator_trainer.tabular import arrow_csv
from estimator_trainer.tabular import cell_syntax
from estimator_trainer.tabular import infer as infer_lib
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.spec import Column, FeatureSpec

TRAIN, TEST = sources.TRAIN, sources.TEST
SPEC = FeatureSpec((Column('x', 'float_normalized'),
                    Column('n', 'integer_categorical'),
                    Column('color', 'string_categorical')), 'y',
                   head='binary')
HEADER = ('x', 'n', 'color', 'y')
# Cells TensorFlow's parser reads, or not, or differently from Python.
NUMBERS = ['1', '-2', '+3', '1.5', '.5', '5.', '1e3', '1E-2', '+1e+2', ' 7',
           '8 ', '0x1A', '-0x10', 'inf', '-Inf', 'infinity', '1_000',
           '\uff11\uff12', '\u0663', '1e', 'e5', '--1', '1d', '0x', '1.5.5',
           '12abc', '0.' + '1' * 29, '0.' + '1' * 30, '9' * 20, '1.0']


def _csv(path, rows):
  path.write_text('\n'.join(','.join(row) for row in [HEADER, *rows]) + '\n')
  return str(path)


def _source(path, **kwargs):
  return TabularSource({TRAIN: path, TEST: path}, SPEC, **kwargs)


def _no_arrow(*_):
  raise arrow_csv.Rejected('the test reads with TensorFlow')


def _statistics(source, monkeypatch, reader):
  """(rows, mean of x, vocabulary counts of n) by the statistics pass's
  `reader`: arrow, tensorflow (Arrow's read refused) or python
  (TabularSource.columns, which a value TensorFlow refuses falls back
  to)."""
  if reader == 'python':
    columns = source.columns(TRAIN)
    x = columns['x']
    return len(x), float(np.nanmean(x)), sorted(columns['n'].tolist())
  with monkeypatch.context() as patch:
    if reader == 'tensorflow':
      patch.setattr(arrow_csv, 'batches', _no_arrow)
    summary = scan.summarise(source, TRAIN, progress=False)
  counts = summary.counts['n'].counts
  return (summary.rows, summary.numbers['x'].result()[0],
          sorted(v for v, count in counts.items() for _ in range(count)))


def _parsed(source):
  records = tf.constant(list(source.records(TRAIN).as_numpy_iterator()))
  raw, _, _ = source.parse(records)
  return {name: value.numpy() for name, value in raw.items()}


def _tensorflow_number(text, dtype):
  """TensorFlow's reading of `text` (decode_csv's, which training used
  before cells were text first; to_number agrees): a number or None."""
  default = tf.constant([0.0 if dtype == tf.float32 else 0], dtype)
  results = []
  for parse in (lambda: tf.strings.to_number(text, dtype),
                lambda: tf.io.decode_csv([f'"{text}"'], [default])[0][0]):
    try:
      results.append(parse().numpy().item())
    except tf.errors.InvalidArgumentError:
      results.append(None)
  assert results[0] == results[1], (text, results)
  return results[0]


# TensorFlow's parser is what can differ between the stacks.
@pytest.mark.both_stacks
@pytest.mark.parametrize('dtype', [tf.float32, tf.int64])
def test_the_number_syntax_is_tensorflows(dtype):
  name = dtype.name
  for text in NUMBERS:
    expected = _tensorflow_number(text, dtype)
    assert cell_syntax.readable(text, name) == (expected is not None), text
    if expected is not None:
      value = cell_syntax.number(text, name)
      assert np.array(value, dtype.as_numpy_dtype) == expected, text


def test_missing_values_are_missing_in_every_reader(tmp_path, monkeypatch):
  """NA, N/A, null, ... in a number column: missing in infer, in each read
  of the statistics pass, in training's parse (as pandas reads them); in
  a string column, 'NA' is a value."""
  pd = pytest.importorskip('pandas')  # (Not in the TensorFlow 2.21 stack.)
  from pandas._libs.parsers import STR_NA_VALUES  # pylint: disable=g-import-not-at-top
  # pandas' own list (2.0 adds 'None'), not the package's.
  tokens = sorted(STR_NA_VALUES | {'None'})
  assert sorted(cell_syntax.MISSING_VALUES) == tokens
  rows = [(f'{i * 1.5}', str(i % 3), 'NA' if i % 4 else 'red', str(i % 2))
          for i in range(40)]
  rows += [(token, token, 'red', '1') for token in tokens]
  path = _csv(tmp_path / 'na.csv', rows)
  # pandas 2 adds 'None' to its default list; this pandas may predate it.
  frame = pd.read_csv(path, na_values=['None'])
  assert frame.x.isna().sum() == frame.n.isna().sum() == len(tokens)
  spec, lines = infer_lib.infer(path, 'y')
  assert [(c.name, c.kind) for c in spec.columns] == [
      ('x', 'float_normalized'), ('n', 'float_normalized'),
      ('color', 'string_categorical')], lines
  assert (f'x: float_normalized (numbers; {len(tokens)} of {len(rows)} '
          'missing; imputed with their mean)') in lines
  source = _source(path)
  expected_n = sorted([-1] * len(tokens) + frame.n.dropna().astype(
      int).tolist())
  for reader in ('arrow', 'tensorflow', 'python'):
    count, mean, n = _statistics(source, monkeypatch, reader)
    assert count == len(frame), reader
    np.testing.assert_allclose(mean, frame.x.mean(), rtol=1e-6,
                               err_msg=reader)
    assert n == expected_n, reader
  raw = _parsed(source)
  np.testing.assert_array_equal(np.isnan(raw['x']), frame.x.isna())
  np.testing.assert_allclose(raw['x'][~frame.x.isna()], frame.x.dropna())
  np.testing.assert_array_equal(raw['n'], frame.n.fillna(-1).astype(int))
  assert [v.decode() for v in raw['color']] == [row[2] for row in rows]
  assert source.columns(TRAIN)['color'].tolist() == [row[2] for row in rows]


def test_the_statistics_read_the_numbers_training_reads(tmp_path,
                                                        monkeypatch):
  """Cells TensorFlow reads: the same numbers in each read of the
  statistics pass and in training's parse; any other: the statistics pass
  fails naming it, in every read, before training."""
  readable = [t for t in NUMBERS if _tensorflow_number(t, tf.float32)
              is not None and np.isfinite(_tensorflow_number(t, tf.float32))]
  path = _csv(tmp_path / 'good.csv', [(t, '1', 'red', '0') for t in readable])
  expected = np.array([_tensorflow_number(t, tf.float32) for t in readable],
                      np.float32)
  source = _source(path)
  for reader in ('arrow', 'tensorflow', 'python'):
    _, mean, _ = _statistics(source, monkeypatch, reader)
    np.testing.assert_allclose(mean, expected.astype(np.float64).mean(),
                               rtol=1e-6, err_msg=reader)
  np.testing.assert_array_equal(_parsed(source)['x'], expected)
  # Those Python's float() or int() (the Python read's before) or Arrow's
  # typed read (0x1A as an int64) took.
  refused = [(t, 'x', '1') for t in ('1_000', '\uff11\uff12', '\u0663',
                                     'infinity', '0.' + '1' * 30)]
  refused += [('1', 'n', t) for t in ('+3', '0x1A', '1_0', '9' * 20)]
  # Those this stack's parser refuses (TensorFlow 2.16+ reads '+3',
  # 'infinity' and longer floats; cell_syntax follows the stack's).
  refused = [(text, column, n) for text, column, n in refused
             if _tensorflow_number(text if column == 'x' else n,
                                   tf.float32 if column == 'x' else tf.int64
                                   ) is None]
  assert len(refused) >= 6
  for text, column, n in refused:
    path = _csv(tmp_path / 'bad.csv',
                [('2', '1', 'red', '0'), (text if column == 'x' else '1', n,
                                          'red', '1')])
    for reader in ('arrow', 'tensorflow', 'python'):
      with pytest.raises(DataError) as error:
        _statistics(_source(path), monkeypatch, reader)
      assert str(error.value).startswith(
          f"{path} line 3, column '{column}': "
          f'{text if column == "x" else n!r} is '), reader


def test_a_long_float_is_read_as_training_reads_it(tmp_path, monkeypatch):
  """A float cell of 40 characters: TensorFlow 2.15's parser refuses it
  (more than MAX_FLOAT_CHARS), 2.16+'s reads it. Arrow's typed read took
  it on every stack: on 2.15 the statistics counted a number that training
  then failed on (a bare InvalidArgumentError after the statistics were
  stored), or with --unreadable_as_missing read as missing (the mean of
  20 values, training's fill of 19)."""
  text = '0.' + '1' * 38
  rows = [(f'{i}.5', '1', 'red', str(i % 2)) for i in range(20)]
  rows[7] = (text, '1', 'red', '1')
  path = _csv(tmp_path / 'long.csv', rows)
  for unreadable_as_missing in (False, True):
    source = _source(path, unreadable_as_missing=unreadable_as_missing)
    try:
      x = _parsed(source)['x']
    except tf.errors.InvalidArgumentError:
      x = None  # Training's parse refuses it.
    for reader in ('arrow', 'tensorflow', 'python'):
      if x is None:
        with pytest.raises(DataError) as error:
          _statistics(source, monkeypatch, reader)
        assert str(error.value) == (
            f"{path} line 9, column 'x': {text!r} is not a number "
            '(--unreadable_as_missing reads such cells as missing)'), reader
      else:
        _, mean, _ = _statistics(source, monkeypatch, reader)
        np.testing.assert_allclose(mean, np.nanmean(x.astype(np.float64)),
                                   rtol=1e-6, err_msg=reader)


def test_a_word_in_a_number_column_fails_or_is_missing_by_choice(
    tmp_path, monkeypatch, caplog):
  rows = [(f'{i}.5', '1', 'red', str(i % 2)) for i in range(30)]
  rows[6] = ('unknown', '1', 'red', '0')
  path = _csv(tmp_path / 'word.csv', rows)
  spec, lines = infer_lib.infer(path, 'y')
  assert spec.columns[0] == Column('x', 'float_normalized')
  assert (f"x: float_normalized (numbers; 1 of 30 cells not numbers (first "
          f"'unknown', {path} line 8): the run fails on them, or with "
          '--unreadable_as_missing reads them as missing; imputed with their '
          'mean)') in lines
  for reader in ('arrow', 'tensorflow', 'python'):
    with pytest.raises(DataError) as error:
      _statistics(_source(path), monkeypatch, reader)
    assert str(error.value) == (
        f"{path} line 8, column 'x': 'unknown' is not a number "
        '(--unreadable_as_missing reads such cells as missing)')
  source = _source(path, unreadable_as_missing=True)
  frame = pytest.importorskip('pandas').read_csv(path, na_values=['unknown'])
  with caplog.at_level(logging.WARNING):
    _, mean, _ = _statistics(source, monkeypatch, 'arrow')
  np.testing.assert_allclose(mean, frame.x.mean(), rtol=1e-6)
  assert (f"1 cells of column 'x' in {path} are no numbers, read as missing "
          f"(--unreadable_as_missing); the first: 'unknown', {path} line 8"
          ) in caplog.messages
  raw = _parsed(source)
  np.testing.assert_array_equal(np.isnan(raw['x']), frame.x.isna())


def test_the_missing_values_are_the_specs_to_give(tmp_path, monkeypatch):
  """A file's own marker ('?', as UCI's adult data writes a missing age)
  given to infer is kept in the spec, and every reader (infer, the three
  reads of the statistics pass, training's parse) reads it as missing, and
  an empty cell still; pandas' list is then no longer missing (`NA` is an
  error naming it). Without it, '?' is an error naming it."""
  rows = [(f'{i * 1.5}', str(i % 3), 'red', str(i % 2)) for i in range(30)]
  rows[4] = ('?', '?', 'red', '0')
  rows[9] = ('', '', 'red', '1')
  path = _csv(tmp_path / 'marks.csv', rows)
  with pytest.raises(DataError, match=rf"^{path} line 6, column 'x': '\?' "
                     'is not a number'):
    _statistics(_source(path), monkeypatch, 'python')
  spec, lines = infer_lib.infer(path, 'y', missing_values=['?'])
  assert spec.missing_values == ('?',)
  assert 'x: float_normalized (numbers; 2 of 30 missing; imputed with their ' \
      'mean)' in lines, lines
  assert spec_lib.loads(spec_lib.to_json(spec)) == spec
  present = [float(row[0]) for row in rows if row[0] not in ('?', '')]
  codes = sorted([-1, -1] + [int(row[1]) for row in rows
                             if row[1] not in ('?', '')])
  source = TabularSource({TRAIN: path, TEST: path}, dataclasses.replace(
      SPEC, missing_values=('?',)))
  for reader in ('arrow', 'tensorflow', 'python'):
    count, mean, n = _statistics(source, monkeypatch, reader)
    assert (count, n) == (30, codes), reader
    np.testing.assert_allclose(mean, np.mean(present), rtol=1e-6,
                               err_msg=reader)
  raw = _parsed(source)
  assert np.isnan(raw['x']).tolist() == [row[0] in ('?', '') for row in rows]
  rows[12] = ('NA', '1', 'red', '0')
  path = _csv(tmp_path / 'marks.csv', rows)
  for reader in ('arrow', 'tensorflow', 'python'):
    with pytest.raises(DataError, match=rf"^{path} line 14, column 'x': "
                       "'NA' is not a number"):
      _statistics(source, monkeypatch, reader)


def test_a_carriage_return_inside_a_line_is_an_error_naming_it(tmp_path):
  """Arrow's reader ended a record at a bare \\r, TensorFlow's did not: the
  statistics counted 3 records, training 2."""
  path = tmp_path / 'cr.csv'
  path.write_bytes(b'x,n,color,y\r\n1,1,red,0\r\n2,1,re\rd,1\r\n3,2,b,1\r\n')
  message = (f'{path} line 3: a carriage return (\\r) inside the line; a '
             'record is one line, ended by \\n or \\r\\n')
  with pytest.raises(DataError) as error:
    _source(str(path)).num_examples(TRAIN)
  assert str(error.value) == message
  with pytest.raises(DataError) as error:
    infer_lib.infer(str(path), 'y')
  assert str(error.value) == message
  path.write_bytes(b'x,n,color,y\r\n1,1,red,0\r\n2,1,red,1\r\n3,2,b,1\r\r\n')
  with pytest.raises(DataError) as error:
    _source(str(path)).num_examples(TRAIN)
  assert str(error.value).startswith(f'{path} line 4: a carriage return')
