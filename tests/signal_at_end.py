"""`python tests/signal_at_end.py FLAGS...`: the trainer (estimator_trainer.run)
whose cluster worker 0 (the chief) SIGTERMs itself as the final evaluation of
a TF2 engine begins: a moment of a cluster run's end, exact, with no sleep
(as tests/test_run_end.py signals a run in process)."""

import json
import os
import signal

from estimator_trainer import run
from estimator_trainer.tf2 import evaluation

_evaluate = evaluation.Evaluator.evaluate


def _signalled(self, step):
  task = json.loads(os.environ['TF_CONFIG'])['task']
  if task['index'] == 0 and step == self._job.max_steps:  # pylint: disable=protected-access
    signal.raise_signal(signal.SIGTERM)
  return _evaluate(self, step)


if __name__ == '__main__':
  evaluation.Evaluator.evaluate = _signalled
  run.run()
