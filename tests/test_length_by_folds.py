"""scripts/length_by_folds.py (docs/guide/tabular.md, the length of dnn and
wide_deep): its folds part the training rows, and its choice is the
candidate of the lowest mean held-out loss over complete folds."""

import numpy as np
import pytest

import scripts_dir

folds = scripts_dir.load('length_by_folds')


def test_the_folds_part_the_rows_alike_in_every_run():
  masks = folds.fold_masks(23, 5, seed=42)
  assert np.array_equal(sum(mask.astype(int) for mask in masks),
                        np.ones(23, int))  # Disjoint, together all rows.
  assert sorted(int(mask.sum()) for mask in masks) == [4, 4, 5, 5, 5]
  assert all(np.array_equal(a, b) for a, b in zip(
      masks, folds.fold_masks(23, 5, seed=42)))
  assert not all(np.array_equal(a, b) for a, b in zip(
      masks, folds.fold_masks(23, 5, seed=1)))


def _run(fold, steps, loss, table='pima'):
  return {'table': table, 'model': 'dnn', 'seed': 42, 'fold': fold,
          'steps': steps, 'loss': loss}


def test_the_lowest_mean_held_out_loss_is_chosen_once_every_fold_ran():
  runs = [_run(0, 2000, 0.5), _run(1, 2000, 0.3),   # Mean 0.4.
          _run(0, 8000, 0.25), _run(1, 8000, 0.75),  # Mean 0.5.
          _run(None, 8000, 0.01),  # All rows': not a fold's.
          _run(0, 2000, 0.1, 'wine'), _run(0, 8000, 0.2, 'wine'),
          _run(1, 2000, 0.1, 'wine')]  # Wine's 8,000 on fold 1 not run.
  assert folds.chosen(runs) == {
      ('pima', 'dnn', 42): (2000, {2000: pytest.approx(0.4), 8000: 0.5})}
