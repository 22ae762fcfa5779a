#!/usr/bin/env bash
# Set up (idempotent) and run the main job: 10 epochs of Fashion-MNIST with
# the CLI's defaults (no strategy: on one CPU or GPU, MirroredStrategy adds
# an all-reduce and, in the estimator engine, one step per session.run).
# Extra arguments are trainer flags, e.g. --strategy=mirrored for several
# GPUs.
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
# A model_dir per stack: their default engines differ (estimator, ctl), and
# the TF2 engines cannot resume an Estimator checkpoint.
run=fashion_mnist
[ "$STACK" = tf215 ] || run="fashion_mnist_$STACK"
exec "$VENV/bin/python" -m estimator_trainer.run \
  --model_dir="${MODEL_DIR:-$ROOT/runs/$run}" "$@"
