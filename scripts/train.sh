#!/usr/bin/env bash
# Set up (idempotent) and run the main job: 10 epochs of Fashion-MNIST with
# MirroredStrategy. Extra arguments are trainer flags and override these.
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
exec "$VENV/bin/python" -m estimator_trainer.run \
  --model_dir="${MODEL_DIR:-$ROOT/runs/fashion_mnist}" --strategy=mirrored "$@"
