"""On the PYTHONPATH of a test's cluster tasks (test_loss_scale.py): their
dynamic loss scale starts at FEW_OVERFLOWS_SCALE, as the test's in-process
runs patch it, so their first float16 steps overflow."""

from estimator_trainer import loss_scale

loss_scale.INITIAL_SCALE = 2.0**23
