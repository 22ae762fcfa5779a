#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; extra arguments go to pytest
# (e.g. -m "not slow" for the fast set). Two parts: the tests marked serial
# (they time, signal or race real processes) alone, after all the others two
# at a time (pytest-xdist; the machine has 2 cores). A part with nothing
# selected (pytest's exit code 5) is no failure. The last line totals both
# parts.
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "$ROOT"
set +e
export PYTEST_COUNTS_FILE
PYTEST_COUNTS_FILE=$(mktemp)
trap 'rm -f "$PYTEST_COUNTS_FILE"' EXIT
"$VENV/bin/python" -m pytest -n 2 --dist worksteal --part=parallel "$@"
parallel=$?
"$VENV/bin/python" -m pytest --part=serial "$@"
serial=$?
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
