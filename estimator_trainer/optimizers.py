"""The optimizer and its learning-rate schedule: one definition, a builder
per engine (tf.compat.v1.train for the Estimator graph, Keras for the TF2
engines), the same algorithm and numbers in both."""

import dataclasses
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf

from estimator_trainer import config_optimizers

# tf.compat.v1.train.AdamOptimizer's; Keras's default is 1e-7.
ADAM_EPSILON = 1e-8
ADAM_BETA_1 = 0.9  # Both defaults; migrate.py checks Estimator's steps by it.
ADAM_BETA_2 = 0.999  # Both defaults (tf2/canned.py writes v1's powers).
# tf.compat.v1.train's Adagrad and FTRL start their accumulators at 0.1 (as
# Keras's do); v1's Adagrad divides by sqrt(accumulator) with no epsilon.
INITIAL_ACCUMULATOR = 0.1
# The v1 optimizer's slot names (migrate.py) -> the Keras optimizer's lists
# of slot variables, in the order of its built variables.
SLOTS = {'adam': (('Adam', '_momentums'), ('Adam_1', '_velocities')),
         'adagrad': (('Adagrad', '_accumulators'),),
         'ftrl': (('Ftrl', '_accumulators'), ('Ftrl_1', '_linears')),
         'sgd': ()}
_MOMENTUM_SLOTS = (('Momentum', 'momentums'),)
# --optimizer_kwargs by the Keras optimizers' names -> tf.compat.v1.train's.
_V1_NAMES = {'beta_1': 'beta1', 'beta_2': 'beta2'}


def slots(name, kwargs=None):
  """SLOTS of optimizer `name` with its --optimizer_kwargs `kwargs`: SGD
  has a momentum slot only with a momentum."""
  if name == 'sgd' and (kwargs or {}).get('momentum'):
    return _MOMENTUM_SLOTS
  return SLOTS[name]


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
  """`name` (config_optimizers.OPTIMIZERS: Adam, SGD, and the canned
  Estimators' defaults: Adagrad for DNNs, FTRL for linear models, whose
  sparse updates touch only the embedding rows a batch looks up) with
  `learning_rate`, decayed by a
  cosine to 0 at `decay_steps` under `lr_decay='cosine'`, constant under
  'none' and for config_optimizers.CONSTANT_RATE_OPTIMIZERS (FTRL); `kwargs`,
  its further parameters (config_optimizers.OPTIMIZER_KWARGS, by the Keras
  optimizer's names: FTRL's l1 and l2 strengths, SGD's momentum...)."""

  name: str
  learning_rate: float
  lr_decay: str = 'none'
  decay_steps: Optional[int] = None
  kwargs: Optional[Dict[str, Any]] = None

  def __post_init__(self):
    if self.lr_decay == 'cosine' and not self.decay_steps:
      raise ValueError("lr_decay='cosine' needs decay_steps (the training "
                       "steps) or lr_decay='none'")

  @property
  def decays(self):
    """Whether the rate follows the schedule: not FTRL's, whose weights are
    a closed form of its accumulators over the current rate (a rate of 0
    makes them 0)."""
    return (self.lr_decay == 'cosine' and
            self.name not in config_optimizers.CONSTANT_RATE_OPTIMIZERS)

  @classmethod
  def from_params(cls, params):
    """The spec in model_fn's `params` (an estimator.params.ModelParams)."""
    return cls(params.optimizer, params.learning_rate, params.lr_decay,
               params.decay_steps, params.optimizer_kwargs)

  def _kwargs(self, v1=False):
    kwargs = dict(self.kwargs or {})
    if v1:
      kwargs = {_V1_NAMES.get(key, key): value
                for key, value in kwargs.items()}
    return kwargs

  def v1(self, step=None):
    """(tf.compat.v1.train optimizer, its learning rate) for Estimator; the
    rate is a callable, the tensor of the step `step()` returns where it is
    called (without `step`, the graph's global step): in a loop of steps
    (estimator/graph.py), each step's own."""
    def learning_rate():
      if self.decays:
        return tf.compat.v1.train.cosine_decay(
            self.learning_rate,
            step() if step else tf.compat.v1.train.get_or_create_global_step(),
            self.decay_steps)
      return tf.constant(self.learning_rate)
    kwargs = self._kwargs(v1=True)
    if self.name == 'adam':
      optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate, **{
          'beta1': ADAM_BETA_1, 'epsilon': ADAM_EPSILON, **kwargs})
    elif self.name == 'adagrad':
      optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate, **{
          'initial_accumulator_value': INITIAL_ACCUMULATOR, **kwargs})
    elif self.name == 'ftrl':
      optimizer = _FtrlOptimizer(learning_rate, **{
          'initial_accumulator_value': INITIAL_ACCUMULATOR, **kwargs})
    elif kwargs.get('momentum'):
      optimizer = _KerasMomentum(learning_rate, **kwargs)
    else:
      optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
    return optimizer, learning_rate

  def keras(self):
    """A Keras optimizer, its step counter in `iterations`.

    Its rate is always a schedule, constant under lr_decay='none': from a
    float, Keras makes the rate a variable that checkpoints keep and restore
    over a resumed run's --learning_rate. From a schedule it recomputes its
    variable (`_current_learning_rate`) at every step, so the flags of the
    run that trains decide, whatever a checkpoint holds.
    """
    if self.decays:
      learning_rate = tf.keras.optimizers.schedules.CosineDecay(
          self.learning_rate, self.decay_steps)
    else:
      learning_rate = ConstantLearningRate(self.learning_rate)
    kwargs = self._kwargs()
    if self.name == 'adam':
      kwargs = {'beta_1': ADAM_BETA_1, 'beta_2': ADAM_BETA_2,
                'epsilon': ADAM_EPSILON, **kwargs}
      for name in ('beta_1', 'beta_2'):
        kwargs[name] = float(np.float32(kwargs[name]))
      return tf.keras.optimizers.Adam(learning_rate, **kwargs)
    if self.name == 'adagrad':
      return tf.keras.optimizers.Adagrad(learning_rate, **{
          'initial_accumulator_value': INITIAL_ACCUMULATOR, 'epsilon': 0.0,
          **kwargs})
    if self.name == 'ftrl':
      return tf.keras.optimizers.Ftrl(learning_rate, **{
          'initial_accumulator_value': INITIAL_ACCUMULATOR, **kwargs})
    if kwargs.get('momentum'):
      return _LazyMomentumSGD(learning_rate, **kwargs)
    return tf.keras.optimizers.SGD(learning_rate, **kwargs)

  def for_linear_part(self, name, learning_rate=None, kwargs=None):
    """The wide part's spec (canned wide & deep's `linear_optimizer`):
    optimizer `name` at `learning_rate` (default: this spec's) with its
    `kwargs`, on this spec's schedule (FTRL: constant)."""
    return dataclasses.replace(self, name=name,
                               learning_rate=learning_rate or
                               self.learning_rate, kwargs=kwargs)


def by_part(optimizer, variables, linear=None):
  """[(optimizer, its variables)] that apply a step's gradients: `linear`,
  (the wide part's optimizer, its variables) or None, takes those variables;
  `optimizer` the others, last: it counts the step once the others have
  applied theirs, as canned wide & deep's train op does."""
  if linear is None:
    return [(optimizer, list(variables))]
  linear_optimizer, linear_variables = linear
  wide = {variable.ref() for variable in linear_variables}
  return [(linear_optimizer, list(linear_variables)),
          (optimizer, [variable for variable in variables
                       if variable.ref() not in wide])]


def variables_of(parts):
  """The variables of `parts` (by_part), in order."""
  return [variable for _, part in parts for variable in part]


def per_part(parts, gradients):
  """[(optimizer, its (gradient, variable) pairs)] of `parts`, given the
  `gradients` of variables_of(parts)."""
  gradients = iter(gradients)
  return [(optimizer, [(next(gradients), variable) for variable in part])
          for optimizer, part in parts]


class _FtrlOptimizer(tf.compat.v1.train.FtrlOptimizer):
  """v1 FTRL that takes a callable rate, as v1's Adam, Adagrad and SGD do
  (its own `_prepare` converts the rate as it is): called at every
  `apply_gradients`, so each step of a loop of steps reads its own."""

  def _prepare(self):
    rate = self._learning_rate
    self._learning_rate = self._call_if_callable(rate)
    try:
      super()._prepare()
    finally:
      self._learning_rate = rate


# SGD's momentum, one step in every engine: Keras's (and canned's, Keras's
# legacy SGD), v = momentum * v - rate * gradient, then w += v (nesterov:
# w += momentum * v - rate * gradient), a sparse gradient (an embedding's
# looked-up rows) moving only its rows. tf.compat.v1.train's
# MomentumOptimizer keeps the gradients' sum instead, times the current
# rate, which differs once the rate changes; Keras's own SGD decays every
# row of a sparse gradient's variable.


def _momentum_step(velocity, gradient, rate, momentum, nesterov):
  """(the new velocity, the weights' change) of the velocity's rows."""
  velocity = velocity * momentum - rate * gradient
  return velocity, (velocity * momentum - rate * gradient if nesterov
                    else velocity)


class _KerasMomentum(tf.compat.v1.train.Optimizer):
  """tf.compat.v1.train SGD with Keras's momentum (above); its slot
  `Momentum` is Keras's velocity."""

  def __init__(self, learning_rate, momentum, nesterov=False):
    super().__init__(use_locking=False, name='Momentum')
    self._rate, self._momentum, self._nesterov = (learning_rate, momentum,
                                                  nesterov)

  def _create_slots(self, var_list):
    for variable in var_list:
      self._zeros_slot(variable, 'Momentum', self._name)

  def _prepare(self):
    self._rate_tensor = tf.convert_to_tensor(
        self._call_if_callable(self._rate))

  def _constants(self, variable):
    dtype = variable.dtype.base_dtype
    return (tf.cast(self._rate_tensor, dtype),
            tf.constant(self._momentum, dtype), self._nesterov)

  def _resource_apply_dense(self, grad, handle):
    slot = self.get_slot(handle, 'Momentum')
    velocity, change = _momentum_step(slot, grad, *self._constants(handle))
    with tf.control_dependencies([slot.assign(velocity)]):
      return handle.assign_add(change)

  def _resource_apply_sparse(self, grad, handle, indices):
    slot = self.get_slot(handle, 'Momentum')
    velocity, change = _momentum_step(tf.gather(slot, indices), grad,
                                      *self._constants(handle))
    with tf.control_dependencies([slot.scatter_update(
        tf.IndexedSlices(velocity, indices))]):
      return handle.scatter_add(tf.IndexedSlices(change, indices))


@tf.keras.utils.register_keras_serializable('estimator_trainer')
class _LazyMomentumSGD(tf.keras.optimizers.SGD):
  """Keras's SGD with momentum whose sparse gradients move only their
  rows (above)."""

  def update_step(self, gradient, variable):
    if not isinstance(gradient, tf.IndexedSlices):
      return super().update_step(gradient, variable)
    slot = self.momentums[self._index_dict[self._var_key(variable)]]
    velocity, change = _momentum_step(
        tf.gather(slot, gradient.indices), gradient.values,
        tf.cast(self.learning_rate, variable.dtype),
        tf.cast(self.momentum, variable.dtype), self.nesterov)
    slot.scatter_update(tf.IndexedSlices(velocity, gradient.indices))
    variable.scatter_add(tf.IndexedSlices(change, gradient.indices))
    return None


@tf.keras.utils.register_keras_serializable('estimator_trainer')
class ConstantLearningRate(tf.keras.optimizers.schedules.LearningRateSchedule):
  """lr_decay='none' for Keras: the same rate at every step."""

  def __init__(self, learning_rate):
    super().__init__()
    self.learning_rate = learning_rate

  def __call__(self, step):
    del step
    return tf.constant(self.learning_rate, tf.keras.backend.floatx())

  def get_config(self):
    return {'learning_rate': self.learning_rate}
