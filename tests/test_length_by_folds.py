"""scripts/length_by_folds.py (docs/guide/tabular-measurements.md, the length
of dnn and wide_deep): its folds part the training rows, and over complete
folds it chooses the candidate of the lowest mean held-out loss and the
one-standard-error rule's."""

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


def test_the_lowest_mean_and_the_one_standard_error_choice():
  runs = [_run(0, 2000, 0.5), _run(1, 2000, 0.3),   # Mean 0.4.
          _run(0, 8000, 0.25), _run(1, 8000, 0.75),  # Mean 0.5.
          _run(None, 8000, 0.01),  # All rows': not a fold's.
          _run(0, 2000, 0.1, 'wine'), _run(0, 8000, 0.2, 'wine'),
          _run(1, 2000, 0.1, 'wine')]  # Wine's 8,000 on fold 1 not run.
  assert folds.chosen(runs) == {
      ('pima', 'dnn', 42): (2000, 2000, {2000: pytest.approx(0.4),
                                         8000: 0.5})}
  # 8,000 steps lowest on every fold: the one-SE rule takes it (the
  # gaps' mean 0.103 over their standard error 0.0033); lowest by less than
  # the folds' spread of the gaps, the shorter 2,000.
  sure = [_run(fold, 2000, loss + 0.1) for fold, loss in
          enumerate((0.2, 0.5, 0.31))] + [
              _run(fold, 8000, loss) for fold, loss in
              enumerate((0.2, 0.5, 0.3))]
  assert folds.chosen(sure)[('pima', 'dnn', 42)][:2] == (8000, 8000)
  noisy = [_run(fold, 2000, loss) for fold, loss in
           enumerate((0.3, 0.6, 0.31))] + [
               _run(fold, 8000, loss) for fold, loss in
               enumerate((0.2, 0.5, 0.4))]
  assert folds.chosen(noisy)[('pima', 'dnn', 42)][:2] == (8000, 2000)
