"""What the image and the structured builders share: batch norm's constants
and the per-layer seeding of initializers."""

BN_MOMENTUM = 0.9  # Keras's 0.99 leaves short runs' moving statistics stale.
BN_EPSILON = 1e-5


def initializer(kind, seed, index):
  """Each layer's initializer gets its own seed: `RunConfig(tf_random_seed)`
  does not fix Keras 2.15 initial weights, and explicit seeds keep replicas
  and reruns identical without touching global random state."""
  return kind(seed=_nth(seed, index))


def _nth(seed, index):
  return None if seed is None else seed + index


class Seeds:
  """The structured builders' seeds: seed + 0, 1, 2... per layer in build
  order (None: unseeded), as `initializer` gives them."""

  def __init__(self, seed):
    self._seed = seed
    self._index = -1

  def next(self):
    self._index += 1
    return _nth(self._seed, self._index)

  def __call__(self, kind, **kwargs):
    """An initializer of class `kind` with the next seed."""
    return kind(seed=self.next(), **kwargs)
