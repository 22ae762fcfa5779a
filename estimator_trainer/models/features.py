"""The features of an input element: the model's inputs and, keyed apart
from them, each example's weight and evaluation's padding.

Their keys are `weight` and `padding`, which a model_fn fed by an input_fn
of your own reads (the documented contract), unless the model has an input
of that name: a structured-data column may be named anything, `weight`
included, and stays a feature. Then the key is the name with `_` before it,
as many times as it takes to be no input's name. The input that writes the
keys and the engines that read them both take them from the model's inputs
(FeatureKeys.of), so they meet whatever the columns are called."""

import collections.abc
import dataclasses

WEIGHT, PADDING = 'weight', 'padding'


def _apart(key, names):
  while key in names:
    key = '_' + key
  return key


@dataclasses.dataclass(frozen=True)
class FeatureKeys:
  """The features' key of the example weights (0 for the eval input's
  padding) and, in EVAL, of True for the padding's rows (which
  num_examples leaves out)."""

  weight: str = WEIGHT
  padding: str = PADDING

  @classmethod
  def of(cls, model_input=None):
    """The keys beside `model_input`'s names (structured data's encoded
    columns: a dict by name; an image shape has none)."""
    names = (set(model_input)
             if isinstance(model_input, collections.abc.Mapping) else set())
    return cls(_apart(WEIGHT, names), _apart(PADDING, names))

  def inputs(self, features):
    """What the model is called with: the image batch, or the dict of
    encoded columns (`features` without the weights and the padding)."""
    inputs = {name: value for name, value in features.items()
              if name not in (self.weight, self.padding)}
    return inputs['image'] if set(inputs) == {'image'} else inputs
