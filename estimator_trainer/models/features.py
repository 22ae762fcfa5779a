"""The features of an input element: the model's inputs and, keyed apart
from them, each example's weight and evaluation's padding, and in PREDICT
a row's key column and place, forwarded to its predictions.

Their keys are `weight` and `padding`, which a model_fn fed by an input_fn
of your own reads (the documented contract), unless the model has an input
of that name: a structured-data column may be named anything, `weight`
included, and stays a feature. Then the key is the name with `_` before it,
as many times as it takes to be no input's name. The input that writes the
keys and the engines that read them both take them from the model's inputs
(FeatureKeys.of), so they meet whatever the columns are called."""

import collections.abc
import dataclasses

from estimator_trainer.errors import UsageError

WEIGHT, PADDING = 'weight', 'padding'
# The prefix of PREDICT's forwarded features: 'forward:id' is the key column
# `id` (tabular/rows.py), which the predictions carry as `id`.
FORWARD = 'forward:'


def _apart(key, names, prefix=False):
  while key in names or prefix and any(n.startswith(key) for n in names):
    key = '_' + key
  return key


@dataclasses.dataclass(frozen=True)
class FeatureKeys:
  """The features' key of the example weights (0 for the eval input's
  padding) and, in EVAL, of True for the padding's rows (which
  num_examples leaves out)."""

  weight: str = WEIGHT
  padding: str = PADDING
  forward: str = FORWARD

  @classmethod
  def of(cls, model_input=None):
    """The keys beside `model_input`'s names (structured data's encoded
    columns: a dict by name; an image shape has none)."""
    names = (set(model_input)
             if isinstance(model_input, collections.abc.Mapping) else set())
    return cls(_apart(WEIGHT, names), _apart(PADDING, names),
               _apart(FORWARD, names, prefix=True))

  def inputs(self, features):
    """What the model is called with: the image batch, or the dict of
    encoded columns (`features` without the weights and the padding)."""
    inputs = {name: value for name, value in features.items()
              if name not in (self.weight, self.padding) and
              not name.startswith(self.forward)}
    return inputs['image'] if set(inputs) == {'image'} else inputs

  def with_forwarded(self, predictions, features):
    """`predictions` (a dict) with the forwarded features under their own
    names, as canned Estimators' forward_features adds them; a name that is
    a prediction's already is a usage error (canned's ValueError)."""
    forwarded = {name[len(self.forward):]: value
                 for name, value in features.items()
                 if name.startswith(self.forward)}
    for name in forwarded:
      if name in predictions:
        raise UsageError(f'--key_column={name} is the name of a prediction; '
                         'rename the column')
    return {**predictions, **forwarded}
