"""A local lease's heartbeat process (lease.hold starts it): rewrites the
holder's record in a file every interval while its stdin is open, removes
the file at end of input (the holder released the lease or died), unless
the file names another holder by then. Standard library only, and run by
path: it starts in milliseconds, without the package's imports.

    python lease_beater.py PATH INTERVAL_SECS RECORD_JSON
"""

import json
import os
import select
import signal
import sys
import time

# What names a holder (a process since a moment) in its record.
IDENTITY = ('host', 'pid', 'since')


def same_holder(record, other):
  return all(record.get(key) == other.get(key) for key in IDENTITY)


def _current(path):
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def main(path, interval, record):
  for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, signal.SIG_IGN)  # To outlive the holder: its signals.
  print('ready', flush=True)
  while not select.select([0], [], [], interval)[0]:
    current = _current(path)
    if current is not None and not same_holder(current, record):
      sys.stderr.write(f"warning: {path} names another holder (host "
                       f"{current.get('host')}, pid {current.get('pid')}): "
                       'this process no longer renews it\n')
      return
    record['heartbeat'] = time.time()
    tmp = f'{path}.tmp-{os.getpid()}'
    with open(tmp, 'w') as f:
      f.write(json.dumps(record) + '\n')
    os.replace(tmp, path)
  current = _current(path)
  if current is not None and same_holder(current, record):
    os.remove(path)


if __name__ == '__main__':
  main(sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3]))
