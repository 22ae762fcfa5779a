# Sourced by train.sh, test.sh and docs.sh: creates the virtualenv and fetches data.
# Idempotent; a no-op (well under a second) once done. STACK picks the
# install: tf215 (default: TensorFlow 2.15 with Estimator, TFX and the docs
# tools, in .venv)
# or tf221 (TensorFlow 2.21 with tf-keras: the TF2 engines, in .venv-tf221).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${STACK:-tf215}
case "$STACK" in
  tf215) CONSTRAINTS=constraints.txt EXTRAS=test,tfx,estimator,docs,tables,beam VENV=${VENV:-$ROOT/.venv} ;;
  tf221) CONSTRAINTS=constraints-tf221.txt EXTRAS=test VENV=${VENV:-$ROOT/.venv-tf221} ;;
  *) echo "error: STACK must be tf215 or tf221, got '$STACK'" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
UV_VERSION=0.13.9  # The installer (below); the packages are pinned in $CONSTRAINTS.
FASHION_MNIST_DIR=/usr/share/datasets/fashion-mnist

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
  || { echo "error: needs Python 3.11; set PYTHON=" >&2; exit 1; }

# Reinstall only when the dependency files (or the preload library) change.
# uv installs the same pins as pip in about a tenth of the time (here 39 s
# instead of 204 s for the default stack); pip does it where uv cannot be had.
stamp="$VENV/.installed-$(cat "$ROOT/$CONSTRAINTS" "$ROOT/setup.cfg" "$ROOT/setup.py" "$ROOT/estimator_trainer/listen_shim.c" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  if "$VENV/bin/pip" install --quiet --disable-pip-version-check "uv==$UV_VERSION"; then
    "$VENV/bin/uv" pip install --quiet --compile-bytecode \
      --python "$VENV/bin/python" -c "$ROOT/$CONSTRAINTS" -e "$ROOT[$EXTRAS]"
  else
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
      -c "$ROOT/$CONSTRAINTS" -e "$ROOT[$EXTRAS]"
  fi
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi

# Offline copy of Fashion-MNIST (the original IDX files) from Debian.
if [ ! -f "$FASHION_MNIST_DIR/train-images-idx3-ubyte.gz" ] && command -v apt-get >/dev/null; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq dataset-fashion-mnist >/dev/null
fi
