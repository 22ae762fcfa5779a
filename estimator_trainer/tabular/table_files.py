"""A tabular file read whole or in little memory: a CSV file's lines,
header and record count, a TFRecord file's columns and count."""

import codecs
import csv
import gzip
import itertools
import mmap
import os
import struct
import zlib

from google.protobuf import message
import numpy as np
import tensorflow as tf

from estimator_trainer import sources
from estimator_trainer.errors import DataError, first_line

# A TFRecord file's columns are the features of its first records (a
# missing value is an absent feature, so one record may lack some).
SCANNED_RECORDS = 100
_BATCH = 4096
_CHUNK = 1 << 20
# Bytes of a TFRecord file whose frames are counted before their pages leave
# the resident set (_framed_records).
_COUNT_WINDOW = 64 << 20


def open_bytes(path):
  """A CSV file's bytes, as a stream (GZIP decompressed)."""
  f = tf.io.gfile.GFile(path, 'rb')
  return gzip.GzipFile(fileobj=f) if path.endswith('.gz') else f


def text_lines(path):
  """(number from 1, text) of a CSV file's lines as TextLineDataset splits
  them ('\\n', then one trailing '\\r' dropped), read in chunks: a file of
  any size in little memory. DataError on a carriage return inside a line
  or a file that cannot be read (not UTF-8, a broken GZIP stream)."""
  try:
    with open_bytes(path) as f:
      for number, line in enumerate(byte_lines(f), 1):
        line = line.removesuffix(b'\r')
        if b'\r' in line:
          _check_returns(path, [line], number)
        yield number, line.decode('utf-8-sig' if number == 1 else 'utf-8')
  except (OSError, EOFError, zlib.error, tf.errors.OpError,
          UnicodeDecodeError) as e:
    raise DataError(f'{path}: cannot read it ({first_line(e)})') from None


def byte_lines(f):
  """The lines of binary file `f`, split at b'\\n' alone (without it), as
  TextLineDataset splits them: GFile's own lines drop every b'\\r'."""
  tail = b''
  for chunk in iter(lambda: f.read(_CHUNK), b''):
    lines = (tail + chunk).split(b'\n')
    tail = lines.pop()
    yield from lines
  if tail:
    yield tail


def lines_of(data):
  text = data.decode('utf-8-sig')
  return [line[:-1] if line.endswith('\r') else line
          for line in text.split('\n')]


def csv_header(path):
  """A CSV file's header, of its first line alone."""
  return header(path, [text for _, text in itertools.islice(
      text_lines(path), 1)])


def _check_returns(path, lines, first):
  """DataError on the first of `lines` (line numbers from `first`; one
  trailing carriage return dropped) that holds a carriage return: Arrow's
  CSV reader ends a record there, TensorFlow's does not."""
  for number, line in enumerate(lines, first):
    if ('\r' if isinstance(line, str) else b'\r') in line:
      raise DataError(f'{path} line {number}: a carriage return (\\r) inside '
                      'the line; a record is one line, ended by \\n or \\r\\n')


def header(path, lines):
  if not lines or not lines[0].strip():
    raise DataError(f'{path}: no header row (a CSV file starts with the '
                    'column names)')
  return tuple(name.strip() for name in next(csv.reader(lines[:1])))


def csv_file(path):
  """(header, number of records: non-empty lines after the header), read
  in chunks: a file of any size in little memory."""
  decoder, count, tail = codecs.getincrementaldecoder('utf-8')(), 0, b''
  try:
    with open_bytes(path) as f:
      first = f.readline()
      lines = lines_of(first)
      _check_returns(path, lines[:1], 1)
      done = 1  # Lines counted.
      for chunk in iter(lambda: f.read(_CHUNK), b''):
        decoder.decode(chunk)  # (UnicodeDecodeError: cannot read it.)
        data = tail + chunk
        parts = data.split(b'\n')
        tail = parts.pop()
        end = len(data) - len(tail)  # Counted fast: CRLF files are common.
        if data.count(b'\r', 0, end) != data.count(b'\r\n', 0, end):
          _check_returns(path, [p.removesuffix(b'\r') for p in parts],
                         done + 1)
        done += len(parts)
        count += len(parts) - parts.count(b'') - parts.count(b'\r')
      decoder.decode(b'', final=True)
      _check_returns(path, [tail.removesuffix(b'\r')], done + 1)
  except (OSError, EOFError, zlib.error, tf.errors.OpError,
          UnicodeDecodeError) as e:
    raise DataError(f'{path}: cannot read it ({first_line(e)})') from None
  return header(path, lines), count + (tail not in (b'', b'\r'))


def check_has(path, name, columns, scanned=None, why='the feature spec'):
  """DataError unless `name` (named by `why`) is one of the file's
  `columns`."""
  if name not in columns:
    where = f' in its first {scanned} records' if scanned else ''
    raise DataError(f'{path}: no column {name!r}{where} ({why} names it); '
                    f'its columns: {", ".join(columns)}')


def records(path):
  return tf.data.TFRecordDataset(
      path, compression_type=sources.compression([path]))


def example_of(record, path, number):
  try:
    return tf.train.Example.FromString(record)
  except message.DecodeError as e:
    raise DataError(f'{path} record {number}: not a tf.Example ({e})') from None


def _framed_records(path):
  """The records of a plain TFRecord file counted by their frames' lengths
  (3 times faster than reading them); None if the frames do not add up to
  the file (TensorFlow's read then says why), or it is gzipped or not
  local (GFile's seek is slow)."""
  if path.endswith('.gz') or '://' in path:
    return None
  size = os.path.getsize(path)
  if not size:
    return 0
  length = struct.Struct('<Q').unpack_from
  count = position = 0
  # Mapped: twice as fast as a seek and a read per frame.
  with open(path, 'rb') as f, mmap.mmap(f.fileno(), 0,
                                        access=mmap.ACCESS_READ) as data:
    while position + 12 <= size:
      end = min(size, position + _COUNT_WINDOW)
      while position + 12 <= end:  # A frame: length, its CRC, data, CRC.
        position += 16 + length(data, position)[0]
        count += 1
      # The pages counted, out of the resident set (the page cache keeps
      # them): else a 1 GB file's count peaked at 1 GB more RSS.
      done = min(position, size) // mmap.PAGESIZE * mmap.PAGESIZE
      if done:
        data.madvise(mmap.MADV_DONTNEED, 0, done)
  return count if position == size else None


def tfrecord_keys(path):
  """The sorted feature names of a TFRecord file's first records. Eager."""
  try:
    keys = set()
    for number, record in enumerate(
        records(path).take(SCANNED_RECORDS).as_numpy_iterator(), 1):
      keys.update(example_of(record, path, number).features.feature)
  except tf.errors.OpError as e:
    raise DataError(f'{path}: {first_line(e.message)}') from None
  return sorted(keys)


def tfrecord_count(path):
  """The number of records of a TFRecord file. Eager."""
  count = _framed_records(path)
  if count is not None:
    return count
  try:
    # Counted by batch: by record took 30 times longer (9 s for 200,000).
    return int(records(path).batch(_BATCH).reduce(
        np.int64(0), lambda n, batch: n + tf.size(batch, tf.int64)))
  except tf.errors.OpError as e:
    raise DataError(f'{path}: {first_line(e.message)}') from None
