"""Keeps a cluster task's gRPC server on the address TF_CONFIG gives it.

TensorFlow 2.15 listens on every interface (`[::]:<port>`) whatever host
TF_CONFIG names, and its runtime is unauthenticated. The CLI therefore runs a
cluster task with `listen_shim.c` preloaded (built with the package on
Linux): that library's bind() moves the server's wildcard bind to the task's
own address. LD_PRELOAD is read when a process starts, so the CLI executes
itself again, once, with it set. Any other command that trains in a cluster
through the Python API (a TFX trainer, a pipeline's own script) runs confined
the same way with

    python -m estimator_trainer.listen COMMAND [ARG...]
"""

import importlib.util
import logging
import os
import shutil
import socket
import sys
from typing import Optional, Tuple


from estimator_trainer import cluster as cluster_lib
from estimator_trainer.errors import UsageError

_logger = logging.getLogger(__name__)

HOST_ENV = 'ESTIMATOR_TRAINER_LISTEN_HOST'
PORT_ENV = 'ESTIMATOR_TRAINER_LISTEN_PORT'
_SHIM_MODULE = 'estimator_trainer._listen_shim'
_ALL_INTERFACES = ('pass --listen_all_interfaces to listen on every interface '
                   'instead (behind a firewall)')


def task_address(cluster: cluster_lib.Cluster) -> Optional[Tuple[str, int]]:
  """(host, port) this task's server is given; None when it runs none."""
  if cluster.task_type not in cluster.jobs:  # The evaluator.
    return None
  address = cluster.jobs[cluster.task_type][cluster.task_index]
  host, _, port = address.rpartition(':')
  if not port.isdigit() or not 0 < int(port) < 65536:
    raise UsageError(f'TF_CONFIG: {address!r} has no valid port')
  return host.strip('[]'), int(port)


def local_ip(host: str, port: int) -> str:
  """The IP address of this machine that `host` names."""
  try:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
  except socket.gaierror as e:
    raise UsageError(f'TF_CONFIG: cannot resolve {host!r} ({e.strerror})'
                     ) from None
  ips = list(dict.fromkeys(info[4][0] for info in infos))
  for family, _, _, _, sockaddr in infos:
    with socket.socket(family, socket.SOCK_STREAM) as probe:
      try:
        probe.bind((sockaddr[0], 0))
      except OSError:
        continue
    return sockaddr[0]
  raise UsageError(
      f'TF_CONFIG: {host}:{port} ({", ".join(ips)}) is not an address of this '
      f'machine, so this task\'s server cannot listen there; '
      f'{_ALL_INTERFACES}')


def _shim_path():
  spec = importlib.util.find_spec(_SHIM_MODULE)
  if spec is None:
    raise UsageError(
        f'this installation cannot keep the cluster server on its TF_CONFIG '
        f'address (no {_SHIM_MODULE}: Linux only, built by pip install); '
        f'{_ALL_INTERFACES}')
  return spec.origin


def _confines(environ, port, ip=None):
  """Whether `environ` preloads the shim for `port` (and `ip`, if given)."""
  return (environ.get(PORT_ENV) == str(port) and
          ip in (None, environ.get(HOST_ENV)) and
          any('_listen_shim' in path
              for path in environ.get('LD_PRELOAD', '').split()))


def confined_environment(cluster: cluster_lib.Cluster, environ):
  """`environ` with the shim preloaded for this task's address, or None when
  the task runs no server or `environ` already confines it."""
  address = task_address(cluster)
  if address is None:
    return None
  ip, port = local_ip(*address), address[1]
  if _confines(environ, port, ip):
    return None
  preloaded = environ.get('LD_PRELOAD', '').split()
  return {**environ, 'LD_PRELOAD': ' '.join([_shim_path(), *preloaded]),
          HOST_ENV: ip, PORT_ENV: str(port)}


def warn_if_unconfined(cluster: Optional[cluster_lib.Cluster]):
  """Logs a warning when this task's server will listen on every interface."""
  address = cluster and task_address(cluster)
  if address and not _confines(os.environ, address[1]):
    _logger.warning(
        'This task\'s gRPC server will listen on port %d of every interface '
        '(TensorFlow\'s default): keep it behind a firewall, or start this '
        'process with `python -m estimator_trainer.listen COMMAND...` (the CLI '
        'does so itself) to keep it on %s', address[1], address[0])


def confine(cluster: Optional[cluster_lib.Cluster]):
  """Runs this command again with its server confined, if it needs to be."""
  if cluster is None:
    return
  environ = confined_environment(cluster, os.environ)
  if environ is None:
    if task_address(cluster):
      _logger.info('This task\'s server listens on %s port %s only',
                   os.environ[HOST_ENV], os.environ[PORT_ENV])
    return
  sys.stdout.flush()
  sys.stderr.flush()
  # sys.orig_argv: the interpreter's own options and `-m module` included.
  os.execve(sys.executable, sys.orig_argv, environ)


def main(argv):
  """`python -m estimator_trainer.listen COMMAND [ARG...]`: runs COMMAND with
  the gRPC server of the TF_CONFIG task confined to the task's address."""
  if len(argv) < 2 or argv[1] in ('-h', '--help'):
    asked = len(argv) > 1
    print(main.__doc__, file=sys.stdout if asked else sys.stderr)
    return 0 if asked else 2
  try:
    if not shutil.which(argv[1]):
      raise UsageError(f'command not found: {argv[1]}')
    cluster = cluster_lib.from_environment()
    environ = cluster and confined_environment(cluster, os.environ)
    os.execvpe(argv[1], argv[1:], environ or os.environ)
  except (UsageError, OSError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2


if __name__ == '__main__':
  sys.exit(main(sys.argv))
