"""The optimizers a run may choose (--optimizer, --linear_optimizer) and
the further parameters each takes (--optimizer_kwargs,
--linear_optimizer_kwargs), with their check (a UsageError: exit 2);
optimizers.py builds them, config_checks.py checks a config with them."""

from estimator_trainer.errors import UsageError

# The --optimizer and --linear_optimizer choices (optimizers.py builds them).
OPTIMIZERS = ('adam', 'sgd', 'adagrad', 'ftrl')
# The optimizers whose rate --lr_decay leaves constant: FTRL's weights are a
# closed form of its accumulators over the current rate, so a cosine to 0
# would end them at 0 (canned Estimators keep its rate constant too).
CONSTANT_RATE_OPTIMIZERS = ('ftrl',)
_INF = float('inf')
# --optimizer_kwargs: each optimizer's further parameters, by the Keras
# optimizers' names, that both engines' optimizers (tf.compat.v1.train's
# and Keras's) take -> their bounds ((None, None): true or false).
OPTIMIZER_KWARGS = {
    'adam': {'beta_1': (0, 1), 'beta_2': (0, 1), 'epsilon': (0, _INF)},
    'adagrad': {'initial_accumulator_value': (0, _INF)},
    'ftrl': {'learning_rate_power': (-_INF, 0),
             'initial_accumulator_value': (0, _INF),
             'l1_regularization_strength': (0, _INF),
             'l2_regularization_strength': (0, _INF),
             'l2_shrinkage_regularization_strength': (0, _INF),
             'beta': (0, _INF)},
    'sgd': {'momentum': (0, 1), 'nesterov': (None, None)}}


def check_kwargs(flag, optimizer, kwargs):
  """--optimizer_kwargs (or --linear_optimizer_kwargs) `kwargs` of
  `optimizer` (its flag's value): OPTIMIZER_KWARGS' keys, each in its
  bounds."""
  if kwargs is None:
    return
  if optimizer is None:
    raise UsageError(f'--{flag} needs --{flag[:-len("_kwargs")]}')
  for key, value in kwargs.items():
    if key not in OPTIMIZER_KWARGS[optimizer]:
      raise UsageError(f'--{flag}: {optimizer} takes '
                       f'{", ".join(OPTIMIZER_KWARGS[optimizer])}, not '
                       f'{key!r}')
    low, high = OPTIMIZER_KWARGS[optimizer][key]
    if low is None:  # nesterov: true or false.
      ok = isinstance(value, bool)
    else:
      ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
            and low <= value <= high)
    if not ok:
      bounds = 'true or false' if low is None else f'in [{low}, {high}]'
      raise UsageError(f'--{flag}: {key} must be {bounds}, got {value!r}')
