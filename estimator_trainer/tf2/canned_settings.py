"""What a canned Estimator's model_dir records of how its model was built
and trained, read as data (its checkpoint's variables and its graph's
MetaGraphDef proto; nothing in it is run): the parts (`linear/linear_model/`,
`dnn/hiddenlayer_<i>/`), the hidden units, the hidden layers' activation,
dropout and batch norm, and each part's optimizer with the settings its
checkpoint keeps under `training/<Optimizer>/` (the learning rate, FTRL's
l1 and l2 strengths and power, SGD's momentum, Adam's betas).

Whatever the package cannot carry exactly is refused in one line naming it
(CannedError): an optimizer it has not (RMSprop...), Keras's per-step
`decay`, a learning-rate schedule, an activation it cannot read.
"""

import dataclasses
import re
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2

from estimator_trainer.errors import UsageError

LINEAR = 'linear/linear_model'
DNN_INPUT = 'dnn/input_from_feature_columns/input_layer'
# Canned's optimizer classes (their checkpoint scopes, `Adagrad_1` for a
# second of a class) -> the package's --optimizer.
_OPTIMIZERS = {'Adagrad': 'adagrad', 'Adam': 'adam', 'Ftrl': 'ftrl',
               'SGD': 'sgd'}
# The settings a canned optimizer's checkpoint keeps, as --optimizer_kwargs
# (Keras's names, as canned's Keras optimizers name them there).
_KEPT = {'adagrad': (), 'adam': ('beta_1', 'beta_2'), 'sgd': ('momentum',),
         'ftrl': ('learning_rate_power', 'l1_regularization_strength',
                  'l2_regularization_strength', 'beta')}
# Not kept, canned's optimizers' defaults (tf.keras.optimizers.legacy's):
# Adam's epsilon is 1e-7 there, 1e-8 in the package's default.
_DEFAULTS = {'adam': {'epsilon': 1e-7}}
# Canned's batch norm (canned/dnn.py): momentum 0.999, Keras's epsilon.
BATCH_NORM = {'momentum': 0.999, 'epsilon': 1e-3}
# A hidden layer's activation op -> Keras's name of the activation.
_ACTIVATIONS = {'Relu': 'relu', 'Tanh': 'tanh', 'Sigmoid': 'sigmoid',
                'Elu': 'elu', 'Selu': 'selu', 'Softplus': 'softplus',
                'Softsign': 'softsign', 'Relu6': 'relu6', 'Exp': 'exponential'}
_SLOT = re.compile(r'training/((\w+?)(?:_\d+)?)/(linear|dnn)/')
_HYPER = re.compile(r'training/((\w+?)(?:_(\d+))?)/(\w+)')


class CannedError(UsageError):
  """What a canned model_dir holds that cannot be carried exactly."""


@dataclasses.dataclass(frozen=True)
class Optimizer:
  """A part's optimizer: the package's --optimizer `name`, canned's
  checkpoint `scope` of it (`Ftrl`, `Adagrad_1`), its `learning_rate` and
  `kwargs` (--optimizer_kwargs)."""

  name: str
  scope: str
  learning_rate: float
  kwargs: Optional[Dict[str, Any]] = None


@dataclasses.dataclass(frozen=True)
class Settings:
  """The package's counterpart of a canned model: `model` (linear, dnn,
  wide_deep), its `model_kwargs`, each part's Optimizer (None: no such
  part)."""

  model: str
  model_kwargs: Dict[str, Any]
  dnn: Optional[Optimizer]
  linear: Optional[Optimizer]

  def config_values(self):
    """TrainConfig fields that train on as canned did: its optimizers and
    rates, a constant rate (canned's), no L2 prior (canned adds none)."""
    main = self.dnn or self.linear
    values = dict(model=self.model, model_kwargs=self.model_kwargs,
                  optimizer=main.name, learning_rate=main.learning_rate,
                  optimizer_kwargs=main.kwargs, lr_decay='none',
                  weight_decay=0.0, linear_optimizer=None,
                  linear_learning_rate=None, linear_optimizer_kwargs=None)
    if self.dnn and self.linear:
      values.update(linear_optimizer=self.linear.name,
                    linear_learning_rate=self.linear.learning_rate,
                    linear_optimizer_kwargs=self.linear.kwargs)
    return values


def is_canned(stored):
  """Whether checkpoint keys `stored` are a canned Estimator's."""
  return any(key.startswith((f'{LINEAR}/', 'dnn/hiddenlayer_0/'))
             for key in stored)


def read(reader, checkpoint):
  """The Settings of canned checkpoint `checkpoint` (`reader` reads it)."""
  stored = reader.get_variable_to_shape_map()
  hidden, index = [], 0
  while f'dnn/hiddenlayer_{index}/bias' in stored:
    hidden.append(int(stored[f'dnn/hiddenlayer_{index}/bias'][0]))
    index += 1
  has_linear = any(key.startswith(f'{LINEAR}/') for key in stored)
  scopes = _scopes(stored, checkpoint, bool(hidden), has_linear)
  parts = {part: scope and _optimizer(reader, checkpoint, scope)
           for part, scope in scopes.items()}
  kwargs = {}
  if hidden:
    kwargs = {'hidden_units': hidden,
              **_graph_settings(checkpoint, len(hidden), stored)}
    if any(key.startswith(DNN_INPUT) and '_X_' in key for key in stored):
      kwargs['embed_crosses'] = True
  model = ('wide_deep' if hidden and has_linear else
           'dnn' if hidden else 'linear')
  return Settings(model, kwargs, parts['dnn'], parts['linear'])


def _scopes(stored, checkpoint, has_dnn, has_linear):
  """part -> its optimizer's checkpoint scope (None: no such part). A part
  with slots is named by them; one without (SGD without momentum) takes a
  scope no other part has: canned creates the deep part's optimizer first,
  so of two of one class the deep part's is `X`, the wide part's `X_1`."""
  found = {'dnn': set(), 'linear': set()}
  for key in stored:
    match = _SLOT.match(key)
    if match:
      found[match.group(3)].add(match.group(1))
  every = sorted({m.group(1) for m in map(_HYPER.fullmatch, stored) if m},
                 key=lambda scope: (len(scope), scope))
  scopes = {}
  for part, present in (('dnn', has_dnn), ('linear', has_linear)):
    if not present:
      scopes[part] = None
    elif len(found[part]) > 1:
      raise CannedError(f'{checkpoint}: the {part} part has the slots of '
                        f'{len(found[part])} optimizers '
                        f'({", ".join(sorted(found[part]))})')
    else:
      free = [scope for scope in every
              if scope not in found['dnn'] | found['linear'] |
              set(scopes.values())]
      scopes[part] = (found[part].pop() if found[part] else
                      free[0] if free else None)
      if scopes[part] is None:
        raise CannedError(f'{checkpoint}: no optimizer of the {part} part '
                          '(training/<Optimizer>/...) in the checkpoint')
  return scopes


def _optimizer(reader, checkpoint, scope):
  """The Optimizer of checkpoint scope `scope`, or a CannedError naming
  what cannot be carried."""
  cls = re.sub(r'_\d+$', '', scope)
  if cls not in _OPTIMIZERS:
    raise CannedError(
        f'{checkpoint}: trained with the optimizer {cls} (training/{scope}/),'
        f' which the package has not: it carries '
        f'{", ".join(sorted(_OPTIMIZERS))}')
  name = _OPTIMIZERS[cls]
  hypers = {}
  for key in reader.get_variable_to_shape_map():
    match = _HYPER.fullmatch(key)
    if match and match.group(1) == scope:
      # float32's shortest decimal: the same float32, as a user wrote it.
      hypers[match.group(4)] = float(str(np.float32(reader.get_tensor(key))))
  if 'learning_rate' not in hypers:
    raise CannedError(f'{checkpoint}: {cls} has no training/{scope}/'
                      'learning_rate (a learning-rate schedule?): only a '
                      'constant rate is carried')
  if hypers.get('decay'):
    raise CannedError(f'{checkpoint}: training/{scope}/decay is '
                      f'{hypers["decay"]:g}: Keras\'s per-step rate decay '
                      'has no counterpart')
  unknown = sorted(set(hypers) - {'learning_rate', 'decay', 'iter'} -
                   set(_KEPT[name]))
  if unknown:
    raise CannedError(f'{checkpoint}: training/{scope}/{unknown[0]} has no '
                      f'counterpart in the package\'s {name}')
  kwargs = {**_DEFAULTS.get(name, {}),
            **{key: hypers[key] for key in _KEPT[name]
               if key in hypers and (key != 'beta' or hypers[key])}}
  if name == 'sgd' and not kwargs.get('momentum'):
    kwargs.pop('momentum', None)
  return Optimizer(name, scope, hypers['learning_rate'], kwargs or None)


def _graph(checkpoint):
  """The GraphDef of the checkpoint's MetaGraphDef (`<checkpoint>.meta`)."""
  path = f'{checkpoint}.meta'
  if not tf.io.gfile.exists(path):
    raise CannedError(f'{path} is missing: the canned DNN\'s activation, '
                      'dropout and batch norm are read from its graph')
  meta_graph = meta_graph_pb2.MetaGraphDef()
  with tf.io.gfile.GFile(path, 'rb') as f:
    meta_graph.ParseFromString(f.read())
  return meta_graph.graph_def


def _graph_settings(checkpoint, num_hidden, stored):
  """The DNN's `activation`, `dropout` and `batch_norm` model_kwargs, as
  its graph and checkpoint record them."""
  nodes = _graph(checkpoint).node
  users = {}
  for node in nodes:
    for name in node.input:
      users.setdefault(name.split(':')[0].lstrip('^'), []).append(node)
  activations = set()
  for index in range(num_hidden):
    scope = f'dnn/hiddenlayer_{index}/'
    # (Its summaries read the layer's output: the BiasAdd's without one.)
    ops = [node.op for node in users.get(f'{scope}BiasAdd', ())
           if node.name.startswith(scope) and not node.op.endswith('Summary')
           and not node.name.startswith(f'{scope}batchnorm_')]
    known = [_ACTIVATIONS[op] for op in ops if op in _ACTIVATIONS]
    if len(ops) > 1 or len(known) != len(ops):
      raise CannedError(f'{checkpoint}: the activation of {scope[:-1]} '
                        f'(ops {", ".join(ops)}) is none the package '
                        f'carries ({", ".join(_ACTIVATIONS.values())})')
    activations.add(known[0] if known else 'linear')
  if len(activations) > 1:  # (Canned has one activation_fn.)
    raise CannedError(f'{checkpoint}: hidden layers of different '
                      f'activations ({", ".join(sorted(activations))})')
  kwargs = {'activation': activations.pop()}
  rates = {round(float(node.attr['value'].tensor.float_val[0]), 7)
           for node in nodes
           if re.fullmatch(r'dnn/dropout(_\d+)?/dropout/GreaterEqual/y',
                           node.name)}
  if rates:
    if len(rates) > 1:
      raise CannedError(f'{checkpoint}: dropout rates {sorted(rates)}')
    kwargs['dropout'] = rates.pop()
  elif any(node.name.startswith('dnn/dropout') for node in nodes):
    raise CannedError(f'{checkpoint}: its dropout rate cannot be read from '
                      'its graph')
  if 'dnn/hiddenlayer_0/batchnorm_0/gamma' in stored:
    kwargs['batch_norm'] = dict(BATCH_NORM)
  return kwargs
