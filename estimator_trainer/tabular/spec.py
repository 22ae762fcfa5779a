"""The feature spec: what a person writes (or `infer` writes for them) to
describe tabular data: per column its kind, the crosses, the label, an
optional weight column and, for string labels, the label vocabulary.

JSON (one object; columns in order):

  {"name": "census",
   "columns": {"age": {"kind": "float_normalized"},
               "education": {"kind": "string_categorical", "embedding_dim": 8},
               "zip": {"kind": "string_hashed", "num_bins": 100000}},
   "crosses": [{"columns": ["education", "zip"], "num_bins": 1000}],
   "label": "income", "label_vocabulary": ["<=50K", ">50K"],
   "weight": "fnlwgt", "head": "binary"}

The kinds are Keras FeatureSpace's.
"""

import dataclasses
from typing import Optional, Tuple, Union

FLOAT_KINDS = ('float', 'float_normalized', 'float_discretized')
CATEGORICAL_KINDS = ('integer_categorical', 'string_categorical')
HASHED_KINDS = ('string_hashed', 'integer_hashed')
KINDS = FLOAT_KINDS + CATEGORICAL_KINDS + HASHED_KINDS
HEADS = ('multiclass', 'binary', 'multilabel', 'regression')


@dataclasses.dataclass(frozen=True)
class Column:
  """One input column. `num_bins`: of a hashed or discretized column (its
  ids' range); `embedding_dim`: its embedding's width in the deep part of
  `dnn` and `wide_deep` (None: the model's default); `default`: the value
  of a missing cell or feature (None: the kind's: 0.0, '' or -1, which
  look up as out-of-vocabulary)."""

  name: str
  kind: str
  num_bins: Optional[int] = None
  embedding_dim: Optional[int] = None
  default: Union[float, int, str, None] = None

  @property
  def dtype(self):
    """The raw value's dtype name: float32, int64 or string."""
    if self.kind in FLOAT_KINDS:
      return 'float32'
    return 'string' if self.kind.startswith('string') else 'int64'


@dataclasses.dataclass(frozen=True)
class Cross:
  """A hashed cross of categorical columns (Keras HashedCrossing)."""

  columns: Tuple[str, ...]
  num_bins: int
  embedding_dim: Optional[int] = None

  @property
  def name(self):
    return '_X_'.join(self.columns)


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  """Columns, crosses, the label (one column; for multilabel, a tuple of
  0/1 columns), `label_vocabulary` (string labels' classes, in order), an
  optional `weight` column and the `head` the data is for (None: --head
  decides)."""

  columns: Tuple[Column, ...]
  label: Union[str, Tuple[str, ...]]
  crosses: Tuple[Cross, ...] = ()
  label_vocabulary: Optional[Tuple[str, ...]] = None
  weight: Optional[str] = None
  head: Optional[str] = None
  name: str = 'tabular'
