"""The tabular statistics' types (what model_dir's statistics file holds:
statistics.py computes and keeps them) and what differs between two."""

import dataclasses
import json
import math
from typing import Dict, Optional, Tuple, Union

import numpy as np


@dataclasses.dataclass(frozen=True)
class ColumnStatistics:
  """What one column's preprocessing layer is built from. `fill`: a missing
  number's value (None in statistics stored before it: 0.0)."""

  mean: Optional[float] = None
  variance: Optional[float] = None
  boundaries: Optional[Tuple[float, ...]] = None
  vocabulary: Optional[Tuple[Union[str, int], ...]] = None
  fill: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Statistics:
  """Per column name its ColumnStatistics (the kinds that need some), the
  training examples they were computed from, `num_classes` of an integer
  label of a classification head (None otherwise) and a regression's
  `label_scale`: its labels' (mean, standard deviation), None in
  statistics stored before it."""

  columns: Dict[str, ColumnStatistics]
  num_examples: int
  num_classes: Optional[int] = None
  label_scale: Optional[Tuple[float, float]] = None

  def to_json(self):
    columns = {name: {key: value for key, value in
                      dataclasses.asdict(stats).items() if value is not None}
               for name, stats in self.columns.items()}
    scale = {'label_scale': list(self.label_scale)} if self.label_scale else {}
    return json.dumps({'num_examples': self.num_examples,
                       'num_classes': self.num_classes, **scale,
                       'columns': columns}, indent=1) + '\n'

  @classmethod
  def from_json(cls, text):
    values = json.loads(text)
    columns = {}
    for name, stats in values['columns'].items():
      columns[name] = ColumnStatistics(**{
          key: tuple(value) if isinstance(value, list) else value
          for key, value in stats.items()})
    scale = values.get('label_scale')
    return cls(columns, values['num_examples'], values.get('num_classes'),
               tuple(scale) if scale else None)


def differences(stored, fresh):
  """What differs between two Statistics, a phrase per column (the first
  few columns)."""
  found = []
  for name, old in stored.columns.items():
    new = fresh.columns.get(name)
    if new is None:
      continue
    if old.vocabulary is not None and old.vocabulary != new.vocabulary:
      added = len(set(new.vocabulary) - set(old.vocabulary))
      gone = len(set(old.vocabulary) - set(new.vocabulary))
      found.append(f"'{name}' vocabulary ({added} new values, {gone} gone)"
                   if added or gone else f"'{name}' vocabulary order")
    for key in ('mean', 'variance'):
      a, b = getattr(old, key), getattr(new, key)
      if a is not None and not math.isclose(a, b, rel_tol=1e-6,
                                            abs_tol=1e-9):
        found.append(f"'{name}' {key} {a:.6g} now {b:.6g}")
    if old.boundaries is None:
      continue
    # Of other lengths (stored before repeats were merged), allclose would
    # broadcast one boundary over many or fail.
    if len(old.boundaries) != len(new.boundaries):
      found.append(f"'{name}' {len(old.boundaries) + 1} bins now "
                   f'{len(new.boundaries) + 1}')
    elif not np.allclose(old.boundaries, new.boundaries, rtol=1e-6,
                         atol=1e-9):
      found.append(f"'{name}' bin boundaries")
  if stored.num_classes != fresh.num_classes:
    found.append(f'{stored.num_classes} classes now {fresh.num_classes}')
  return found
