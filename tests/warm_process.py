"""`python -m estimator_trainer.run ...` started warm: forked from a server
process that has already imported TensorFlow, as subprocess.Popen would
start it otherwise. A TensorFlow import is most of a small trainer's CPU
(a 2-step run: 8.1 CPU-seconds cold, 4.4 warm on the AMD EPYC, before the
CLI's import paused the garbage collector: ~1.3 less cold since); about 65
of the ~135 processes of one suite run that imported TensorFlow (counted
at their exit) start here: the clusters' tasks, the fault tests', and the
migrate and infer commands' few.

The server is multiprocessing's forkserver, started from this process's
environment as it was when the tests began (conftest.py) and with the
listen shim preloaded, inert until a task's environment names its address.
It only imports: no eager context exists in it (checked on both stacks),
so no runtime whose threads a fork would not carry. A warm process is a
real process of its own (its pid takes signals, its exit code or signal is
its status) that runs the module as `python -m` runs it; what differs is
only what happens before the module's first line, so a command whose
environment changes that (PYTHONPATH, LD_PRELOAD, TensorFlow's import-time
variables: any variable but TF_CONFIG) or whose output before its first
line is the test's subject (the console's start-up) starts cold, as a real
`python` process.

A cluster task runs confined as the CLI confines it
(estimator_trainer.listen): the CLI would execute itself again with the
shim preloaded; here the child starts with the environment that execution
would have, which the CLI then finds confined."""

import atexit
import gc
import importlib.util
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from multiprocessing import forkserver
from multiprocessing import reduction

# The variables a warm process may differ in: read at run time, not while
# the server imports. The KMP_ ones scikit-learn's import sets in a test's
# process are Intel OpenMP's, a runtime the server does not load.
_RUN_TIME_VARIABLES = frozenset({'TF_CONFIG', 'PYTEST_CURRENT_TEST',
                                 'KMP_DUPLICATE_LIB_OK', 'KMP_INIT_AT_FORK'})
_BASE_ENV = dict(os.environ)
_PRELOAD = ['tensorflow', 'estimator_trainer.engines']
_context = None
_lock = threading.Lock()
_cold_sys_path = {}


def _preload():
  """The modules a trainer imports first, with the estimator's where the
  stack has it."""
  if importlib.util.find_spec('tensorflow_estimator') is None:
    return _PRELOAD
  return [*_PRELOAD, 'estimator_trainer.estimator']


def _server():
  global _context
  with _lock:
    if _context is None:
      # pylint: disable=g-import-not-at-top
      from estimator_trainer import listen
      from unittest import mock
      context = multiprocessing.get_context('forkserver')
      context.set_forkserver_preload(_preload())
      shim = listen._shim_path()  # pylint: disable=protected-access
      with mock.patch.dict(os.environ, {**_BASE_ENV, 'LD_PRELOAD': ' '.join(
          filter(None, [shim, _BASE_ENV.get('LD_PRELOAD')]))}, clear=True):
        forkserver.ensure_running()
      _context = context
  return _context


def cpu_seconds():
  """The CPU of the server and of the warm processes it has reaped (they are
  its children, not this process's)."""
  pid = forkserver._forkserver._forkserver_pid  # pylint: disable=protected-access
  if _context is None or pid is None:
    return 0.0
  try:
    with open(f'/proc/{pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
  except FileNotFoundError:
    return 0.0
  # utime, stime, cutime, cstime: fields 14-17 of proc(5).
  return sum(map(int, fields[11:15])) / os.sysconf('SC_CLK_TCK')


def _sys_path(cwd):
  """The sys.path `python -m` has in `cwd` (its first entry), as a cold
  process would find it."""
  if cwd not in _cold_sys_path:
    _cold_sys_path[cwd] = eval(subprocess.run(  # pylint: disable=eval-used
        [sys.executable, '-c', 'import sys; print(sys.path)'], cwd=cwd,
        env=_BASE_ENV, capture_output=True, text=True, check=True).stdout)
  return [cwd, *_cold_sys_path[cwd][1:]]


def _confine(argv):
  """A cluster task's environment as the CLI's own execution with the
  shim would give it."""
  # pylint: disable=g-import-not-at-top
  from estimator_trainer import cluster as cluster_lib
  from estimator_trainer import errors
  from estimator_trainer import listen
  if '--listen_all_interfaces' in argv or 'TF_CONFIG' not in os.environ:
    return
  try:
    environ = listen.confined_environment(cluster_lib.from_environment(),
                                          os.environ)
  except errors.UsageError:
    return  # The CLI says why.
  if environ:
    os.environ.update(environ)


def _child(module, argv, env, cwd, path, new_session, fds):
  """The warm process: `python -m module argv...` from its first line."""
  if new_session:
    os.setsid()
  for target, fd in zip((1, 2), fds):
    os.dup2(fd.detach(), target)
  os.chdir(cwd)
  os.environ.clear()
  os.environ.update(env)
  sys.path[:] = path
  sys.argv = [module, *argv]
  sys.orig_argv = [sys.executable, '-m', module, *argv]
  _confine(argv)
  # A module the server imported (listen: by the engines) runs as a cold
  # process runs it, as __main__ alone: not also as itself, which runpy
  # warns of.
  if sys.modules.pop(module, None) is not None:
    package, _, name = module.rpartition('.')
    if package:
      vars(sys.modules[package]).pop(name, None)
  # What the server imported is no garbage: kept out of this process's
  # collections, which would scan it (a 2-step run 3.1 -> 3.0 CPU-s).
  gc.freeze()
  code = 0
  try:
    runpy.run_module(module, run_name='__main__', alter_sys=True)
  except SystemExit as e:
    code = e.code
  except KeyboardInterrupt:
    # As Python's own: its status is the signal's.
    traceback.print_exc()
    code = -signal.SIGINT
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  # As the interpreter's end: non-daemon threads joined, atexit run.
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  sys.stdout.flush()
  sys.stderr.flush()
  if code == -signal.SIGINT:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
  if code is None:
    code = 0
  elif not isinstance(code, int):
    print(code, file=sys.stderr)
    code = 1
  os._exit(code & 0xff)  # pylint: disable=protected-access


def _fd(stream, default):
  """The file descriptor of Popen's `stream` argument."""
  if stream is None:
    return default
  return stream.fileno() if hasattr(stream, 'fileno') else stream


class _Inherited:
  """A file descriptor the warm process gets a copy of: pickled as the
  forkserver passes descriptors, while Process.start sends its arguments."""

  def __init__(self, fd):
    self.fd = fd

  def __reduce__(self):
    return _Inherited.received, (reduction.DupFd(self.fd),)

  @staticmethod
  def received(dup):
    return dup


def _module_argv(args):
  """(module, argv) of `python -m module argv...`, else None."""
  if len(args) > 2 and args[0] == sys.executable and args[1] == '-m':
    return args[2], list(args[3:])
  return None


def warm(args, env):
  """Whether `args` with `env` (None: this process's) starts warm."""
  if _module_argv(args) is None:
    return False
  env = os.environ if env is None else env
  differs = {name for name in {*env, *_BASE_ENV}
             if env.get(name) != _BASE_ENV.get(name)}
  return not differs - _RUN_TIME_VARIABLES


class WarmPopen:
  """The subset of subprocess.Popen the tests and scripts/local_cluster.py
  use: stdout and stderr a file, PIPE (text) or STDOUT."""

  def __init__(self, args, env=None, stdout=None, stderr=None, text=False,
               start_new_session=False, cwd=None):
    self.args = args
    module, argv = _module_argv(args)
    cwd = os.path.abspath(cwd or os.getcwd())
    self.stdout = None
    ends = []
    if stdout == subprocess.PIPE:
      read, write = os.pipe()
      self.stdout = open(read, 'r' if text else 'rb')  # pylint: disable=consider-using-with
      ends.append(write)
      stdout = write
    out = _fd(stdout, 1)
    err = out if stderr == subprocess.STDOUT else _fd(stderr, 2)
    context = _server()
    self._process = context.Process(target=_child, args=(
        module, argv, dict(os.environ if env is None else env), cwd,
        _sys_path(cwd), start_new_session,
        [_Inherited(out), _Inherited(err)]),
        # One left running is stopped when the tests end (multiprocessing
        # would wait for it), as the tests stop what they start.
        daemon=True)
    try:
      self._process.start()
    finally:
      for fd in ends:
        os.close(fd)
    self.pid = self._process.pid
    self.returncode = None

  def poll(self):
    if self.returncode is None and not self._process.is_alive():
      self.returncode = self._process.exitcode
    return self.returncode

  def wait(self, timeout=None):
    self._process.join(timeout)
    if self.poll() is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, signum):
    os.kill(self.pid, signum)

  def kill(self):
    self.send_signal(signal.SIGKILL)


def popen(args, **kwargs):
  """subprocess.Popen(args, ...), warm where `warm` says it may be."""
  if warm(args, kwargs.get('env')):
    return WarmPopen(args, **kwargs)
  return subprocess.Popen(args, **kwargs)  # pylint: disable=consider-using-with


def run(args, timeout=None, env=None, cwd=None):
  """subprocess.run(args, capture_output=True, text=True, timeout=timeout,
  check=False, env=env, cwd=cwd), warm where `warm` says it may be."""
  if not warm(args, env):
    return subprocess.run(args, capture_output=True, text=True,
                          timeout=timeout, check=False, env=env, cwd=cwd)
  with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile(
      'w+') as err:
    proc = WarmPopen(args, env=env, stdout=out, stderr=err, cwd=cwd)
    try:
      proc.wait(timeout)
    except subprocess.TimeoutExpired:
      proc.kill()  # As subprocess.run does.
      proc.wait()
      raise subprocess.TimeoutExpired(args, timeout, *_read(out, err))
    return subprocess.CompletedProcess(args, proc.returncode,
                                       *_read(out, err))


def _read(*files):
  for f in files:
    f.seek(0)
  return [f.read() for f in files]
