"""The feature spec's types (spec.py reads and writes them): the column
kinds, Column, Cross and FeatureSpec."""

import dataclasses
from typing import Optional, Tuple, Union

from estimator_trainer import config_checks
from estimator_trainer.tabular import cell_syntax

FLOAT_KINDS = ('float', 'float_normalized', 'float_discretized')
CATEGORICAL_KINDS = ('integer_categorical', 'string_categorical')
HASHED_KINDS = ('string_hashed', 'integer_hashed')
KINDS = FLOAT_KINDS + CATEGORICAL_KINDS + HASHED_KINDS
# A missing number of a float kind read as int64 (NaN has no int64): the
# encoder fills it as it fills a float32 NaN.
MISSING_INT64 = -2**63
HEADS = config_checks.HEADS


@dataclasses.dataclass(frozen=True)
class Column:
  """One input column. `num_bins`: of a hashed or discretized column (its
  ids' range); `embedding_dim`: its embedding's width in the deep part of
  `dnn` and `wide_deep` (None: the model's default); `default`: the value
  of a missing cell or feature (None: the kind's: 0.0, '' or -1, which
  look up as out-of-vocabulary); `dtype`: the raw value's dtype name,
  float32, int64 or string, the kind's unless given (a float kind's may
  be int64: integers of TFRecords' int64_list used as numbers);
  `missing_indicator`: a float or float_normalized column's input also
  says, 1 or 0, whether the value was missing (and filled).

  Given rather than computed (a canned Estimator's feature columns give
  them: tabular/feature_columns.py): `vocabulary` of a categorical column,
  in its order; `boundaries` of a float_discretized one (num_bins then
  len(boundaries) + 1); `num_oov`, a categorical column's out-of-vocabulary
  ids (None: 1; several: a string hashes to one); `one_hot`, an id column
  enters the deep part one-hot (canned indicator_column), not embedded;
  `oov_value`, a value of the given vocabulary that an unknown value looks
  up as (canned's default_value), a missing one ('' or -1) still out of
  vocabulary; `source`, the data's column a column reads if not its own
  (a second column of one feature: canned's numeric_column('age') and a
  bucketized_column of it are 'age' and 'age_bucketized' of source 'age';
  a canned wide & deep model's deep categorical column of a feature whose
  wide column differs, 'city_embedding' of source 'city'); `parts`, the
  parts of wide_deep that take the column, ('linear',) or ('dnn',) (None:
  both, a wide part taking ids only; canned's linear_feature_columns and
  dnn_feature_columns).

  A computed vocabulary (string_categorical, integer_categorical) keeps
  the values seen `min_frequency` times or more (None: 1), the
  `max_vocabulary` most frequent of them (None: all), as tf.Transform's
  vocabulary(frequency_threshold, top_k): the rest look up as
  out-of-vocabulary."""

  name: str
  kind: str
  num_bins: Optional[int] = None
  embedding_dim: Optional[int] = None
  default: Union[float, int, str, None] = None
  dtype: Optional[str] = None
  missing_indicator: bool = False
  vocabulary: Optional[Tuple[Union[str, int], ...]] = None
  boundaries: Optional[Tuple[float, ...]] = None
  num_oov: Optional[int] = None
  one_hot: bool = False
  oov_value: Union[str, int, None] = None
  source: Optional[str] = None
  max_vocabulary: Optional[int] = None
  min_frequency: Optional[int] = None
  parts: Optional[Tuple[str, ...]] = None

  def __post_init__(self):
    if self.dtype is None:
      object.__setattr__(self, 'dtype', kind_dtype(self.kind))
    for field in ('vocabulary', 'boundaries', 'parts'):
      if isinstance(getattr(self, field), list):  # JSON's lists.
        object.__setattr__(self, field, tuple(getattr(self, field)))
    if self.boundaries is not None and self.num_bins is None:
      object.__setattr__(self, 'num_bins', len(self.boundaries) + 1)


def kind_dtype(kind):
  """A kind's raw dtype name: float32, int64 or string."""
  if kind in FLOAT_KINDS:
    return 'float32'
  return 'string' if kind.startswith('string') else 'int64'


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
  optional `weight` column, the `head` the data is for (None: --head
  decides)."""

  columns: Tuple[Column, ...]
  label: Union[str, Tuple[str, ...]]
  crosses: Tuple[Cross, ...] = ()
  label_vocabulary: Optional[Tuple[str, ...]] = None
  weight: Optional[str] = None
  head: Optional[str] = None
  name: str = 'tabular'
  # The cells of a number column that are missing (with an empty cell);
  # None: cell_syntax.MISSING_VALUES, pandas' list.
  missing_values: Optional[Tuple[str, ...]] = None

  @property
  def number_missing_values(self):
    """The cells of a number column that are missing values."""
    return cell_syntax.missing_values(self.missing_values)

  @property
  def label_columns(self):
    """The label's columns: one, or multilabel's several."""
    return (self.label,) if isinstance(self.label, str) else self.label

  @property
  def label_dtype(self):
    """The raw label's dtype name: string with a label vocabulary, float32
    for regression, int64 otherwise (class ids; multilabel's 0/1 each)."""
    if self.label_vocabulary:
      return 'string'
    return 'float32' if self.head == 'regression' else 'int64'

  @property
  def data_columns(self):
    """The feature columns read from the data: all but those of a
    `source`."""
    return tuple(c for c in self.columns if c.source is None)

  @property
  def names(self):
    """Every column of the data the spec names: features, label(s),
    weight."""
    return (tuple(c.name for c in self.data_columns) + self.label_columns +
            ((self.weight,) if self.weight else ()))
