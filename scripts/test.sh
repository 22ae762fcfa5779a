#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; extra arguments go to pytest
# (e.g. -m "not slow" for the fast set). Two parts: the tests marked serial
# (they time, signal or race real processes) alone, after all the others two
# at a time (pytest-xdist; the machine has 2 cores). A part with nothing
# selected (pytest's exit code 5) is no failure.
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "$ROOT"
set +e
"$VENV/bin/python" -m pytest -n 2 --dist worksteal --part=parallel "$@"
parallel=$?
"$VENV/bin/python" -m pytest --part=serial "$@"
serial=$?
for code in $parallel $serial; do
  if [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then exit "$code"; fi
done
[ "$parallel" -eq 0 ] || [ "$serial" -eq 0 ] || exit 5
