"""Mergeable summaries of a split's columns, from which the statistics
derive: a pass adds batches to them in bounded memory, and summaries of
different files (tasks, Beam workers) merge into the same result.

- Numbers: a float column's present values, kept exactly while few (the
  result is then the exact one, bit for bit: numpy's mean, variance and
  quantiles of them), else moments (count, mean, sum of squared
  deviations; Chan et al.'s merge) and a KLL quantile sketch (Apache
  DataSketches) whose normalized rank error is `rank_error()`.
- Counts: a categorical column's count per value (as tf.Transform's
  vocabulary), exact up to MAX_TRACKED distinct values; beyond, a
  Misra-Gries summary whose counts are at most `error` under the true ones.

Every summary is data: `to_dict` and `from_dict` (JSON types, a cluster
task's stored share: shares.py), never code; it also pickles (Beam's
coders, in transit).
"""

import base64
import collections

import numpy as np

# The summaries' fields: a share stored by another format (shares.py)
# is not taken. 2: Counts' `error`; 3: to_dict's JSON (issue 71).
FORMAT = 3
# Present values of a column kept exactly: the result on at most this many
# values equals the exact pass's; past it, 8 bytes a value would grow with
# the data.
EXACT_VALUES = 1_000_000
# KLL's size parameter: rank error about 0.33% (DataSketches' table), a few
# tens of kilobytes per column.
KLL_K = 800
# Distinct values a Counts tracks exactly; past them it keeps at most half
# as many counters (half: a prune, which takes time in MAX_TRACKED, comes
# after MAX_TRACKED // 2 new values at least, not every batch).
MAX_TRACKED = 1_000_000


def _sketch():
  import datasketches  # pylint: disable=g-import-not-at-top
  return datasketches.kll_doubles_sketch(KLL_K)


def rank_error():
  """The quantile sketch's normalized rank error (two-sided bound, 99%)."""
  import datasketches  # pylint: disable=g-import-not-at-top
  return datasketches.kll_doubles_sketch.get_normalized_rank_error(KLL_K,
                                                                   False)


class Numbers:
  """Count, mean, variance and quantiles of float64 values. `quantiles`:
  whether boundaries will be asked for (the sketch costs time)."""

  def __init__(self, quantiles=False):
    self.quantiles = quantiles
    self.exact = []  # Arrays of the values while few; None past that.
    self.count, self.mean, self.m2 = 0, 0.0, 0.0
    self.sketch = None

  def add(self, values):
    values = np.asarray(values, np.float64)
    if not values.size:
      return
    if self.exact is not None:
      self.exact.append(values)
      if self.count + values.size <= EXACT_VALUES:
        self.count += values.size
        return
      values, self.exact = np.concatenate(self.exact), None
      self.count = 0
    self._add_moments(values.size, float(values.mean()),
                      float(np.square(values - values.mean()).sum()))
    if self.quantiles:
      self.sketch = self.sketch or _sketch()
      self.sketch.update(values)

  def _add_moments(self, count, mean, m2):
    total = self.count + count
    delta = mean - self.mean
    self.mean += delta * count / total
    self.m2 += m2 + delta * delta * self.count * count / total
    self.count = total

  def merge(self, other):
    if other.exact is not None:
      for values in other.exact:
        self.add(values)
      return self
    if self.exact is not None:  # Past the exact size: moments from here.
      mine, self.exact, self.count = self.exact, None, 0
      self.merge(other)
      for values in mine:
        self.add(values)
      return self
    self._add_moments(other.count, other.mean, other.m2)
    if other.sketch is not None:
      self.sketch = self.sketch or _sketch()
      self.sketch.merge(other.sketch)
    return self

  def values(self):
    """The exact values, or None past EXACT_VALUES."""
    if self.exact is None:
      return None
    return (np.concatenate(self.exact) if self.exact else
            np.zeros([0], np.float64))

  def result(self, num_bins=None):
    """(mean, variance, boundaries of `num_bins` equal-count bins or fewer:
    _distinct_boundaries) of the values; 0.0, 1.0 and quantiles of [0.0]
    when there are none, as the exact pass gives."""
    exact = self.values()
    quantiles = (np.linspace(0, 1, num_bins + 1)[1:-1] if num_bins else
                 np.zeros([0]))
    if exact is not None:
      if not exact.size:
        return 0.0, 1.0, _distinct_boundaries(np.quantile([0.0], quantiles),
                                              lambda value: None)
      return (float(exact.mean()), float(exact.var()), _distinct_boundaries(
          np.quantile(exact, quantiles), lambda value: _above(exact, value)))
    boundaries = ()
    if num_bins:
      boundaries = _distinct_boundaries(
          self.sketch.get_quantiles(quantiles.tolist(), True),
          self._sketch_above)
    return self.mean, self.m2 / self.count, boundaries

  def _sketch_above(self, value):
    """The sketch's next value above `value`, None above its largest."""
    rank = self.sketch.get_rank(value, True)
    if rank >= 1.0:
      return None
    # Half a value past `value`'s rank: the sketch's next one.
    return self.sketch.get_quantile(min(rank + 0.5 / self.sketch.n, 1.0),
                                    True)

  def to_dict(self):
    """JSON types: the exact values as base64 of little-endian float64
    (floats as text would not all round-trip), the sketch as base64 of its
    own serialization."""
    exact = self.values()
    return {'quantiles': self.quantiles, 'count': self.count,
            'mean': self.mean, 'm2': self.m2,
            'exact': None if exact is None else _base64(
                exact.astype('<f8').tobytes()),
            'sketch': self.sketch and _base64(self.sketch.serialize())}

  @classmethod
  def from_dict(cls, data):
    """`to_dict`'s Numbers; else ValueError, TypeError or LookupError."""
    numbers = cls(typed(data['quantiles'], bool))
    numbers.count = typed(data['count'], int)
    numbers.mean = float(typed(data['mean'], (int, float)))
    numbers.m2 = float(typed(data['m2'], (int, float)))
    if data['exact'] is None:
      numbers.exact = None
    else:
      numbers.exact = [np.frombuffer(_bytes(data['exact']), '<f8').astype(
          np.float64)]
      if numbers.exact[0].size != numbers.count:
        raise ValueError(f'{numbers.exact[0].size} exact values, count '
                         f'{numbers.count}')
    if data['sketch'] is not None:
      import datasketches  # pylint: disable=g-import-not-at-top
      numbers.sketch = datasketches.kll_doubles_sketch.deserialize(
          _bytes(data['sketch']))
    return numbers

  # Pickled (Beam's coders) with the sketch as its bytes: the sketch
  # object does not pickle.
  def __getstate__(self):
    state = dict(self.__dict__)
    state['sketch'] = self.sketch and self.sketch.serialize()
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    if self.sketch is not None:
      import datasketches  # pylint: disable=g-import-not-at-top
      self.sketch = datasketches.kll_doubles_sketch.deserialize(self.sketch)


def _base64(data):
  return base64.b64encode(data).decode('ascii')


def _bytes(text):
  return base64.b64decode(typed(text, str), validate=True)


def typed(value, types):
  """`value`, if of `types` (a bool is no int here); else TypeError."""
  if not isinstance(value, types) or (isinstance(value, bool) and
                                      types is not bool):
    raise TypeError(f'{value!r} is not of {types}')
  return value


def _above(values, value):
  """The smallest of `values` above `value`, None if none is."""
  above = values[values > value]
  return float(above.min()) if above.size else None


def _distinct_boundaries(quantiles, above):
  """The `quantiles` (bin boundaries: a bin holds the values from one up to
  the next) with each repeated one once, as tf.Transform's bucketize: fewer
  bins. A repeated one is a value many share (a column 92 % zeros: [0, 0,
  0]); unless the next boundary does, `above(value)`, the next value, bounds
  its bin, so that the value has a bin of its own (else zeros and every
  larger value would share one). Never more boundaries than quantiles."""
  distinct = sorted({float(value) for value in quantiles})
  repeated = {float(value) for value, repeats in
              collections.Counter(quantiles).items() if repeats > 1}
  boundaries = list(distinct)
  for value, following in zip(distinct, distinct[1:] + [None]):
    after = above(value) if value in repeated else None
    if after is not None and (following is None or after < following):
      boundaries.append(after)
  return tuple(sorted(boundaries))


def _list(values):
  return values.tolist() if isinstance(values, np.ndarray) else values


class Counts:
  """Each distinct value's count; past MAX_TRACKED distinct values a
  Misra-Gries summary, mergeable (Agarwal et al., "Mergeable summaries",
  2012): every count is at most `error` under the true one, never over,
  and `error` is at most the values counted / (MAX_TRACKED // 2 + 1); so
  every value counted more than `error` times is kept."""

  def __init__(self):
    self.counts = {}
    self.error = 0  # 0: the counts are exact.

  @property
  def pruned(self):
    return self.error > 0

  def add(self, values, counts=None):
    """`values` (numpy), or distinct values with their `counts`."""
    if counts is None:
      values, counts = np.unique(values, return_counts=True)
    get = self.counts.get
    for value, count in zip(_list(values), _list(counts)):
      self.counts[value] = get(value, 0) + count
    if len(self.counts) > MAX_TRACKED:
      self._prune(MAX_TRACKED // 2)

  def _prune(self, kept):
    """Takes the (kept + 1)-th largest count off every count, dropping
    those left at 0: at least kept + 1 values lose it each time, so the sum
    of what is taken, `error`, is at most the values counted / (kept + 1)."""
    counts = np.fromiter(self.counts.values(), np.int64, len(self.counts))
    cut = int(np.partition(counts, -kept - 1)[-kept - 1])
    self.counts = {value: count - cut for value, count in self.counts.items()
                   if count > cut}
    self.error += cut

  def to_dict(self):
    """JSON types: the counts as [value, count] pairs (a JSON object's
    keys would turn integer values into strings)."""
    return {'counts': [[value, count] for value, count in
                       self.counts.items()], 'error': self.error}

  @classmethod
  def from_dict(cls, data):
    """`to_dict`'s Counts; else ValueError, TypeError or LookupError."""
    counts = cls()
    counts.error = typed(data['error'], int)
    for value, count in typed(data['counts'], list):
      counts.counts[typed(value, (str, int))] = typed(count, int)
    return counts

  def merge(self, other):
    # A value's count is under by at most the sum of both errors.
    self.error += other.error
    self.add(list(other.counts), list(other.counts.values()))
    return self

  def vocabulary(self, max_size=None, min_count=1, leave_out=()):
    """The values by count, then value; those counted fewer than
    `min_count` times and those in `leave_out` left out; the first
    `max_size` (None: all)."""
    order = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
    return tuple(value for value, count in order
                 if count >= min_count and value not in leave_out
                 )[:max_size]
