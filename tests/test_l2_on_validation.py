"""scripts/l2_on_validation.py's verdict (docs/guide/tabular-measurements.md,
the dnn and wide_deep recipe): the bar of issue 72 and the table it prints
from the runs it logged."""

import json

import scripts_dir

l2 = scripts_dir.load('l2_on_validation')


def _run(rule, score, log_loss=0.2, validation_loss=None, all_rows=False):
  return {'table': 'pima', 'n': 426, 'rule': rule, 'weight_decay': 0.01,
          'validation_loss': validation_loss, 'score': score,
          'log_loss': log_loss, 'metric': 'auc', 'baseline': 0.8,
          'baseline_log_loss': 0.2, 'all_rows': all_rows}


def test_the_bar_is_issue_72s():
  assert l2._meets(_run('n/10', 0.7901, log_loss=0.2099))
  assert not l2._meets(_run('n/10', 0.7899))  # 0.0101 AUC short.
  assert not l2._meets(_run('n/10', 0.9, log_loss=0.2101))  # Log loss +5.05 %.
  regression = dict(_run('n/10', 1.0499), baseline=1.0,
                    baseline_log_loss=None)
  assert l2._meets(regression)
  assert not l2._meets(dict(regression, score=1.0501))


def test_the_report_shows_the_chosen_candidates_retrained_run(tmp_path,
                                                              capsys):
  runs = [_run('n/10', 0.80, validation_loss=0.5),
          _run('n/30', 0.79, validation_loss=0.4),
          _run('n/30', 0.70, all_rows=True)]
  path = tmp_path / 'runs.jsonl'
  path.write_text(''.join(json.dumps(run) + '\n' for run in runs))
  l2._report(str(path), ['n/10', 'n/30'])
  row = capsys.readouterr().out.splitlines()[-1]
  # n = 426: today's rule is n/10 (*); the retrained n/30 misses the bar.
  assert row == ('| pima (426, auc) | 0.8 (0.2) | 0.8 (+0.0%) [0.5]* | '
                 '0.79 (+0.0%) [0.4] | n/30 | 0.7 (+0.0%) | no |')
