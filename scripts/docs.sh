#!/usr/bin/env bash
# Set up (idempotent) and build the documentation site (mkdocs.yml) into
# site/ in strict mode: a broken link or anchor, a reference that does not
# resolve or any other warning fails. `bash scripts/docs.sh serve` serves it
# on 127.0.0.1:8000 instead; other arguments go to `mkdocs build`. The docs
# tools are pinned in constraints.txt (the `docs` extra of the default stack).
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
export NO_MKDOCS_2_WARNING=1  # Material's notice about its successor, on every build.
cd "$ROOT"
if [ "${1:-}" = serve ]; then
  shift
  exec "$VENV/bin/python" -m mkdocs serve --strict "$@"
fi
exec "$VENV/bin/python" -m mkdocs build --strict "$@"
