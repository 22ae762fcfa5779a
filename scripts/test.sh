#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; extra arguments go to pytest
# (e.g. -m "not slow" for the fast set). Two parts: the tests marked serial
# (they time, signal or race real processes) one at a time, and all the
# others two at a time (pytest-xdist; the machine has 2 cores), the tests of
# a module marked xdist_group in one worker, so that what its module
# fixtures make is made once. The second part runs beside the first at idle
# priority: it gets only the CPU the serial tests leave unused (they spend
# much of their time waiting on processes, signals and timeouts), so those
# still run as if alone. Where the priority cannot be lowered that way, the
# parts run one after the other. A part with nothing selected (pytest's exit
# code 5) is no failure. The last line totals both parts.
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "$ROOT"
set +e
export PYTEST_COUNTS_FILE
PYTEST_COUNTS_FILE=$(mktemp)
parallel_log=$(mktemp)
parallel_group=$(mktemp)
# Stopped (Ctrl-C) or done, nothing of the idle part is left running.
trap 'group=$(cat "$parallel_group")
      if [ -n "$group" ] && kill -0 -- "-$group" 2>/dev/null
      then kill -- "-$group"; fi
      rm -f "$PYTEST_COUNTS_FILE" "$parallel_log" "$parallel_group"' EXIT
trap 'exit 130' INT TERM

parallel_tests=("$VENV/bin/python" -m pytest -n 2 --dist loadgroup
                --part=parallel "$@")
# Linux's autogroup scheduling shares the CPU between sessions before it
# looks at nice values: the idle part gets a session of its own, niced as a
# whole.
idle_session() {
  exec setsid --wait sh -c 'echo $$ > "$0"
    [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" != 1 ] ||
      echo 19 > /proc/self/autogroup || exit 97
    exec nice -n 19 "$@"' "$parallel_group" "$@"
}
if (idle_session true) 2>/dev/null; then
  : > "$parallel_group"  # The probe's group is gone.
  echo "scripts/test.sh: the parallel part runs beside the serial one at" \
       "idle priority; its output follows the serial part's"
  idle_session "${parallel_tests[@]}" > "$parallel_log" 2>&1 &
  parallel_pid=$!  # The idle part itself: idle_session execs it.
  "$VENV/bin/python" -m pytest --part=serial "$@"
  serial=$?
  wait "$parallel_pid"
  parallel=$?
  cat "$parallel_log"
else
  "${parallel_tests[@]}"
  parallel=$?
  "$VENV/bin/python" -m pytest --part=serial "$@"
  serial=$?
fi
"$VENV/bin/python" - "$PYTEST_COUNTS_FILE" <<'PY'
import json, sys
from estimator_trainer import stack
totals = {}
for line in open(sys.argv[1]):
  for outcome, count in json.loads(line).items():
    totals[outcome] = totals.get(outcome, 0) + count
# Deselected by one part are run by the other: not a total.
totals.pop('deselected', None)
print(f'scripts/test.sh, TensorFlow {stack.tensorflow_version()}, both parts: '
      + ', '.join(f'{count} {outcome}' for outcome, count in totals.items()))
PY
for code in $parallel $serial; do
  if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then exit "$code"; fi
done
[ "$parallel" -eq 0 ] || [ "$serial" -eq 0 ] || exit 5
