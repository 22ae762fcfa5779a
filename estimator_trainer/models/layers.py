"""What the image and the structured builders share: batch norm's constants
and the per-layer seeding of initializers."""

BN_MOMENTUM = 0.9  # Keras's 0.99 leaves short runs' moving statistics stale.
BN_EPSILON = 1e-5


def initializer(kind, seed, index):
  """Each layer's initializer gets its own seed: `RunConfig(tf_random_seed)`
  does not fix Keras 2.15 initial weights, and explicit seeds keep replicas
  and reruns identical without touching global random state."""
  return kind(seed=None if seed is None else seed + index)
