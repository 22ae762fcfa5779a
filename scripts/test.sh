#!/usr/bin/env bash
# Set up (idempotent) and run the test suite; extra arguments go to pytest
# (e.g. -m "not slow" for the fast set).
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
