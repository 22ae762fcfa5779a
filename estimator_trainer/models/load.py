"""Loading a builder: a built-in name or MODULE:FUNCTION imported by path;
building its model (precision, seeds, weight decay) and checking it (a bad
builder is exit 2; the weights' checkpoint names); a model's input
signature."""

import collections.abc
import contextlib
import importlib
import inspect
import random

import tensorflow as tf

from estimator_trainer import layer_names
from estimator_trainer.errors import UsageError, first_line
from estimator_trainer.models import images
from estimator_trainer.models.features import FeatureKeys
from estimator_trainer.models import tabular


def _is_tabular(model_input):
  return isinstance(model_input, collections.abc.Mapping)


def _encoded(value, field):
  """A field of an EncodedInput, or of its dict (model_fn's params)."""
  return value[field] if isinstance(value, collections.abc.Mapping) else (
      getattr(value, field))


def input_signature(model_input):
  """name -> tf.TensorSpec (batch first, unknown) of the features a model of
  `model_input` takes: `image`, or each encoded column."""
  if not _is_tabular(model_input):
    return {'image': tf.TensorSpec([None, *model_input], tf.float32)}
  return {name: (tf.TensorSpec([None, _encoded(value, 'width')], tf.float32)
                 if _encoded(value, 'kind') == 'dense' else
                 tf.TensorSpec([None], tf.int64))
          for name, value in model_input.items()}


IMAGE_BUILTINS = images.BUILTINS
# The canned Estimators' counterparts, for structured data (tabular.py).
TABULAR_BUILTINS = tuple(tabular.BUILTINS)
BUILTIN_NAMES = (*IMAGE_BUILTINS, *TABULAR_BUILTINS)


def name_of(builder):
  """How model.json, HParams and errors name `builder`: its --model name,
  or MODULE:FUNCTION of a callable."""
  if isinstance(builder, str):
    return builder
  return (f'{getattr(builder, "__module__", "?")}:'
          f'{getattr(builder, "__qualname__", repr(builder))}')


def resolve(name):
  """The builder `name` names: a built-in, or MODULE:FUNCTION imported."""
  if name in IMAGE_BUILTINS:
    return IMAGE_BUILTINS[name]
  if name in tabular.BUILTINS:
    return tabular.BUILTINS[name]
  if ':' not in name:
    raise UsageError(f'--model must be one of {", ".join(BUILTIN_NAMES)} or '
                     f'MODULE:FUNCTION; got {name!r}')
  module_name, function_name = name.split(':', 1)
  try:
    module = importlib.import_module(module_name)
  except Exception as e:  # pylint: disable=broad-except
    raise UsageError(f'--model {name}: cannot import {module_name} '
                     f'({type(e).__name__}: {first_line(e)})') from None
  if not hasattr(module, function_name):
    raise UsageError(f'--model {name}: {module_name} has no '
                     f'{function_name}')
  builder = getattr(module, function_name)
  if not callable(builder):
    raise UsageError(f'--model {name}: {function_name} is not callable')
  return builder


@contextlib.contextmanager
def _seeded_initializers(seed):
  """Keras's initializers given no seed (a user's builder's defaults) draw
  one, when they first run, from a thread-local Python generator, else from
  Python's global one: whatever drew before (another replica count, engine
  or strategy) changed the model's start. While a builder runs, that
  generator is one of `seed` alone. (Variables a model makes only when
  first called, a subclassed model's, are made after.)"""
  backend = importlib.import_module(tf.keras.backend.int_shape.__module__)
  local = getattr(backend, '_SEED_GENERATOR', None)
  if seed is None or local is None:
    yield
    return
  saved = getattr(local, 'generator', None)
  local.generator = random.Random(seed)
  try:
    yield
  finally:
    local.generator = saved


@contextlib.contextmanager
def _precision(precision):
  """Keras's global dtype policy while a builder runs: layers take theirs
  when they are made."""
  saved = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy(precision)
  try:
    yield
  finally:
    tf.keras.mixed_precision.set_global_policy(saved)


def _decayed(name):
  """Whether --weight_decay covers the variable of `name`: every kernel,
  and the linear model's (or wide part's) weights of ids, which are its
  coefficients as much as a number's kernel is (LogisticRegression's L2
  covers both); not biases, batch-norm scales, the DNN's embeddings or its
  numbers' periodic `frequencies` (numeric_embedding.py: the L2 would pull
  them to 0, a constant embedding)."""
  return 'kernel' in name or (name.startswith('linear/weights_') and
                              'embeddings' in name)


def build(builder, model_input, num_classes, model_kwargs=None, seed=None,
          precision='float32', sync_batch_norm=False, weight_decay=0.0):
  """The model of `builder` (a callable or a --model name) for data of
  `model_input` and `num_classes` logits, made under
  `precision` ('mixed_bfloat16', 'mixed_float16': bfloat16 or float16
  compute, float32 variables), with
  `weight_decay` x the sum of its kernels' squares (Keras's L2, not on
  biases or batch-norm scales) in `model.losses`."""
  name = name_of(builder)
  if isinstance(builder, str):
    builder = resolve(builder)
  kwargs = dict(model_kwargs or {})
  accepted = inspect.signature(builder).parameters
  if 'seed' in accepted:
    kwargs.setdefault('seed', seed)
  if sync_batch_norm:
    if 'sync_batch_norm' not in accepted:
      raise UsageError(f'--sync_batch_norm: the builder of --model {name} '
                       'takes no sync_batch_norm argument')
    kwargs['sync_batch_norm'] = True
  try:
    # The variables' names come from the builder alone (layer_names).
    with _precision(precision), layer_names.counters().fresh(), (
        _seeded_initializers(seed)):
      model = builder(
          dict(model_input) if _is_tabular(model_input) else
          tuple(model_input), num_classes, **kwargs)
  except (UsageError, tf.errors.OpError):
    # TensorFlow's runtime errors are the cluster's, not the builder's: a
    # multi-worker peer gone while the new weights are broadcast.
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UsageError(f'--model {name} raised {type(e).__name__}: '
                     f'{first_line(e)}') from None
  if not isinstance(model, tf.keras.Model):
    raise UsageError(f'--model {name} returned a {type(model).__name__}, '
                     'not a tf.keras.Model')
  if weight_decay:
    for variable in model.trainable_variables:
      if _decayed(variable.name):
        model.add_loss(_l2(variable, weight_decay))
  return model


def _l2(variable, factor):
  """The penalty as a closure: a lambda taking the variable as a default
  argument fails tf.saved_model.save (no encoder for a tf.Variable as a
  function's argument), so a TF2 export of a model with weight decay did."""
  return lambda: factor * tf.reduce_sum(tf.square(variable))


def check(builder, model_input, num_classes, model_kwargs=None,
          precision='float32', sync_batch_norm=False, inspect=None):
  """Builds the model in a scratch graph (no variables or layer names left
  behind) and checks its logits for a batch of 2, and `inspect(model)` when
  given: a bad builder fails here, before anything is written.

  Returns the names of the model's weights, in `model.weights` order, as
  an Estimator checkpoint keys them (model_fn builds in a fresh graph too;
  weights.py reads them). Call it before building the model eagerly: Keras
  refuses to call a model made before a graph-mode build of its classes.
  """
  name = name_of(builder)
  with tf.Graph().as_default():
    model = build(builder, model_input, num_classes, model_kwargs,
                  precision=precision, sync_batch_norm=sync_batch_norm)
    if inspect:
      inspect(model)
    batch = FeatureKeys.of(model_input).inputs({
        name: tf.zeros([2, *spec.shape[1:]], spec.dtype)
        for name, spec in input_signature(model_input).items()})
    try:
      logits = model(batch, training=False)
      names = [weight.name.split(':')[0] for weight in model.weights]
    except Exception as e:  # pylint: disable=broad-except
      what = (f'the encoded columns {", ".join(model_input)}'
              if _is_tabular(model_input) else
              f'images of shape {list(model_input)}')
      raise UsageError(f'--model {name}: the model fails on {what} '
                       f'({type(e).__name__}: {first_line(e)})') from None
  if not isinstance(logits, tf.Tensor) or logits.shape != (2, num_classes):
    shape = getattr(logits, 'shape', type(logits).__name__)
    raise UsageError(f'--model {name}: logits must be [batch, {num_classes}]'
                     f', got {shape}')
  if logits.dtype != tf.float32:
    raise UsageError(f'--model {name}: logits must be float32, got '
                     f'{logits.dtype.name} (under mixed precision give the '
                     "last layer dtype='float32')")
  return names
