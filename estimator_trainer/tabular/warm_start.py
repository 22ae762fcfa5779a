"""A warm start of structured data across changed statistics: this run's
vocabularies are computed from its own training split, so a value's id (and
the row of each table it indexes: its embedding, its linear weights) may
differ from the source model's. The rows are remapped by value, as canned
Estimators' `WarmStartSettings(var_name_to_vocab_info=...)` does; a value
new to this run keeps its table's initial row (canned's
`backup_initializer`). Hashed columns need none: a value's bin does not
depend on the data.
"""

import collections
import dataclasses
import logging
from typing import Any, Dict

import numpy as np
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer.tabular import statistics as statistics_lib
from estimator_trainer.tabular.encoder import OOV_INDICES, EncodedInput

_logger = logging.getLogger(__name__)

# A weight whose rows a column's ids index: the column (and how many of its
# values are new), per row of this run's the source's row (-1: a value new
# to this run), and its layer's initializer (None: zeros).
Table = collections.namedtuple('Table', 'label rows initializer')


@dataclasses.dataclass(frozen=True)
class Remapping:
  """Per categorical column whose vocabulary changed, for each of its ids in
  this run the source's id (-1: a value new to this run), and how many
  values are new; `model_input`: the source model's encoded inputs (a model
  of them reads its checkpoint)."""

  rows: Dict[str, np.ndarray]
  new_values: Dict[str, int]
  model_input: Dict[str, Any]

  def label(self, column):
    new = self.new_values[column]
    return f'{column} ({new} new value{"s" if new > 1 else ""})' if new else (
        column)

  def tables(self, model):
    """Index in `model.weights` -> Table, of each weight with a row per id
    of a remapped column, of a layer called on that column's input itself
    (the built-in models' embeddings and linear weights)."""
    inputs = model.input if isinstance(model.input, dict) else {}
    index = {id(weight): i for i, weight in enumerate(model.weights)}
    found = {}
    for layer in model.layers:
      try:
        called_on = layer.input
      except AttributeError:  # A layer called several times: not a table.
        continue
      for column, rows in self.rows.items():
        if called_on is inputs.get(column):
          found.update({
              index[id(weight)]: Table(
                  self.label(column), rows,
                  getattr(layer, 'embeddings_initializer', None))
              for weight in layer.weights if weight.shape[0] == len(rows)})
    return found


def remapping(warm_start_from, statistics):
  """The Remapping from the model_dir of `warm_start_from` to a run of
  `statistics` (None: images); None when that model_dir stores no
  statistics (images, a model_dir of an earlier version) or no vocabulary
  changed.

  Says in one line when the statistics differ beyond the vocabularies:
  those weights are copied as they are. A float_normalized column's kernel
  then sees inputs normalized by this run's mean and variance: undoing that
  exactly would change the bias of whichever layer takes the column (a
  builder's own layers, perhaps not warm-started), and keeping the source's
  mean would store statistics that are not this run's data's."""
  directory = layout.source_model_dir(warm_start_from)
  path = layout.statistics_file(directory)
  if statistics is None or not tf.io.gfile.exists(path):
    return None
  source = statistics_lib.read(path)
  # The vocabularies are remapped (below); what else changed is not.
  changed = statistics_lib.differences(dataclasses.replace(source, columns={
      name: dataclasses.replace(stats, vocabulary=None)
      for name, stats in source.columns.items()}), statistics)
  if changed:
    _logger.warning(
        '--warm_start_from %s: its statistics differ from this run\'s (%s); '
        'the weights are copied as they are: a float_normalized column\'s '
        'kernel now sees inputs normalized by this run\'s mean and variance, '
        'a float_discretized column\'s rows stand for other bins', directory,
        '; '.join(changed))
  rows, new_values = {}, {}
  for column, stats in statistics.columns.items():
    old = source.columns.get(column)
    if stats.vocabulary is None or old is None or old.vocabulary is None or (
        old.vocabulary == stats.vocabulary):
      continue
    old_id = {value: i + OOV_INDICES for i, value in enumerate(old.vocabulary)}
    rows[column] = np.array([*range(OOV_INDICES), *(
        old_id.get(value, -1) for value in stats.vocabulary)])
    new_values[column] = int(np.sum(rows[column] < 0))
  if not rows:
    return None
  model_input = layout.read_model_file(directory)['model_input']
  return Remapping(rows, new_values, {
      name: EncodedInput(**fields) for name, fields in model_input.items()})
