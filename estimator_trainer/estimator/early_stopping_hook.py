"""The estimator engine's early stopping, by early_stopping.py's rule: at
the evaluation that meets it, as the TF2 engines stop; with
--validation_fraction, on the validation part's evaluations (Validator).

Alone, train_and_evaluate evaluates inside the session.run that saved the
checkpoint (its saving listener, after the hooks' after_run): an exporter,
the last of EvalSpec's, applies the rule to each evaluation there and stops
the session after that run. Training ends on the evaluated step, whose
evaluation is the run's last (metrics.json), and `--export=final` exports
it. In a cluster an evaluator task evaluates while the workers train: they
follow its evaluations in model_dir/eval after every session.run.
"""

import glob
import os

import tensorflow as tf

from estimator_trainer import best_weights
from estimator_trainer import early_stopping
from estimator_trainer import layout


class _CurrentRun(tf.estimator.SessionRunHook):
  """Keeps the running session.run's context (an exporter stops it)."""

  def __init__(self):
    self.context = None

  def before_run(self, run_context):
    self.context = run_context


class _StopExporter(tf.estimator.Exporter):
  """After each evaluation (the last of EvalSpec's exporters): when the
  rule is met, exports the evaluated checkpoint as the final one with
  `final_exporters` and stops training on the evaluated step."""

  def __init__(self, patience, run, final_exporters, validator):
    self._patience = patience
    self._run = run
    self._final_exporters = final_exporters
    self._validator = validator

  @property
  def name(self):
    return 'early_stopping'

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    if is_the_final_export or not (
        self._validator.stop if self._validator else
        early_stopping.no_improvement(
            early_stopping.eval_accuracies(estimator.eval_dir()),
            self._patience)):
      return None
    for exporter in self._final_exporters:
      exporter.export(
          estimator, os.path.join(os.path.dirname(export_path), exporter.name),
          checkpoint_path, eval_result, True)
    self._run.context.request_stop()
    return None


class Validator(tf.estimator.Exporter):
  """--validation_fraction's, the first of EvalSpec's exporters: evaluates
  the validation part (`input_fn`) at the checkpoint just evaluated (into
  eval_validation/), keeps the best (best_weights.Best), decides the stop,
  and hands the later exporters its score (--export=best ranks by it)."""

  def __init__(self, model_dir, patience, input_fn):
    self.best = best_weights.Best(model_dir, patience)
    self._input_fn = input_fn
    self.stop = False

  @property
  def name(self):
    return layout.VALIDATION

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    validation = estimator.evaluate(self._input_fn,
                                    checkpoint_path=checkpoint_path,
                                    name=layout.VALIDATION)
    self.stop = self.best.after(checkpoint_path, validation)
    eval_result[early_stopping.VALIDATION_SCORE] = early_stopping.score(
        validation)


def after_evaluations(patience, final_exporters, validator=None):
  """(hook, exporter) of train_and_evaluate in one process: the exporter
  stops training at the evaluation that meets the rule (of `validator`'s
  evaluations if given), and exports it with `final_exporters` (which
  export only the final evaluation)."""
  run = _CurrentRun()
  return run, _StopExporter(patience, run, final_exporters, validator)


def _follow(eval_dir, patience):
  """should_stop() by the evaluations in `eval_dir`, read again only when
  its event files changed (a listing per session.run)."""
  seen = {'files': None, 'stop': False}

  def should_stop():
    files = [(path, os.path.getsize(path)) for path in sorted(
        glob.glob(os.path.join(eval_dir, 'events.out.tfevents.*')))]
    if files != seen['files']:
      seen['files'] = files
      seen['stop'] = early_stopping.no_improvement(
          early_stopping.eval_accuracies(eval_dir), patience)
    return seen['stop']
  return should_stop


class _StopHook(tf.estimator.SessionRunHook):
  """Requests a stop when `should_stop()`, checked after every run."""

  def __init__(self, should_stop):
    self._should_stop = should_stop

  def after_run(self, run_context, run_values):
    if self._should_stop():
      run_context.request_stop()


def make_hook(estimator, patience):
  """Stops training once `patience` evaluations that another task wrote
  brought no better accuracy.

  Each task decides from the shared eval summaries, except under
  multi_worker_mirrored, where workers that stopped apart would hang the
  all-reduce: there TensorFlow's hook agrees on the stop through a variable.
  TensorFlow's `make_early_stopping_hook` cannot serve the other strategies:
  it sends every `train_distribute` down that multi-worker path (its check
  is a generator, always true), which fails under MirroredStrategy.
  """
  should_stop = _follow(estimator.eval_dir(), patience)
  strategy = estimator.config.train_distribute
  if strategy and 'Collective' in type(strategy).__name__:
    return tf.estimator.experimental.make_early_stopping_hook(
        estimator, should_stop, run_every_secs=None, run_every_steps=1)
  return _StopHook(should_stop)
