"""The length of a structured `dnn` or `wide_deep` run that gives none
(issue 72), where the recipe's floor sets it (10 epochs of the training
files' records are fewer steps than min_structured_steps): the floor, twice
or four times it, chosen by 5-fold cross-validation on the training
records. Each candidate trains on four folds and is scored on the fifth
(--cv_fold runs in model_dir/length/, two at a time, each an ordinary run
of the same flags); the shortest candidate whose mean held-out loss is
within one standard error of the lowest is taken (the one-standard-error
rule, Hastie et al., The Elements of Statistical Learning, 7.10, on the
paired folds). Measured on the 24 tables of
docs/guide/tabular-measurements.md ("The length of dnn and wide_deep").
The choice becomes the run's --train_steps, which its model_dir records
(a resume keeps it); a fold run that finished is not run again.
"""

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np

from estimator_trainer import config_checks
from estimator_trainer import errors
from estimator_trainer import layout
from estimator_trainer import outputs
from estimator_trainer import run_record
from estimator_trainer import sources
from estimator_trainer import strategy
from estimator_trainer.errors import TrainerError
from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import table_files

_logger = logging.getLogger(__name__)

FOLDS = 5
FACTORS = (1, 2, 4)  # x the floor.
MODELS = ('dnn', 'wide_deep')
JOBS = 2  # Fold runs at once.
# Fewer records leave folds of a few rows, whose losses choose nothing.
MIN_RECORDS = 100
# Not forwarded to the fold runs: each has its own model_dir, trains and
# evaluates, exports nothing.
_OWN = ('model_dir', 'mode', 'export', 'train_steps', 'cv_fold')


def planned(config):
  """`config` with the length chosen where the floor would set it, else
  `config` itself."""
  floor, records = _floor(config)
  if floor is None:
    return config
  candidates = [floor * factor for factor in FACTORS]
  directory = layout.length_dir(config.model_dir)
  common = _common_argv(config)
  _logger.info(
      'Length: 10 epochs of the training files\' %d records are fewer '
      'steps than the %s floor of %d: choosing %s steps by %d-fold '
      'cross-validation on the training records (%d runs in %s; '
      '--train_steps skips this)',
      records, config.model, floor, ', '.join(map(str, candidates)), FOLDS,
      FOLDS * len(candidates), directory)
  _start_over_unless_same(directory, common)
  losses = _run_folds(directory, common, candidates)
  lowest, chosen, means = choices(losses)
  shown = []
  for steps in candidates:
    gap, error = _gap(losses, steps, lowest)
    shown.append(f'{steps}: {means[steps]:.4g}' + (
        f' ({gap:+.2g} over {lowest}\'s, one SE {error:.2g})'
        if steps != lowest else ''))
  _logger.info('Length: mean held-out loss %s; chose %d steps (the shortest '
               'within one standard error of the lowest)', ', '.join(shown),
               chosen)
  return dataclasses.replace(config, train_steps=chosen)


def choices(losses):
  """(lowest, one_se, means) of `losses` ({steps: [the held-out loss of
  each fold, in one order]}): the candidate of the lowest mean, and the
  shortest whose mean exceeds it by at most one standard error of their
  paired per-fold differences."""
  means = {steps: float(np.mean(by)) for steps, by in losses.items()}
  lowest = min(means, key=means.get)
  for steps in sorted(losses):
    gap, error = _gap(losses, steps, lowest)
    if gap <= error:
      return lowest, steps, means
  return lowest, lowest, means


def _gap(losses, steps, lowest):
  """(The mean of `steps`' per-fold losses over `lowest`'s, its standard
  error)."""
  gap = np.subtract(losses[steps], losses[lowest])
  return gap.mean(), gap.std(ddof=1) / np.sqrt(len(gap))


def _floor(config):
  """(The floor of config's steps, the training files' records) if the
  floor sets them and the choice applies, else (None, None):
  a structured dnn or wide_deep run on one machine that gives no length
  or stopping rule, whose training files hold fewer records than 10 epochs
  of the floor's steps (the evaluation part not left out: a bound), and
  at least MIN_RECORDS."""
  if not (config.structured and config.model in MODELS and
          config.mode in config_checks.TRAINING_MODES and
          config.train_steps is None and config.train_epochs is None and
          config.cluster is None and config.cv_fold is None and
          not config.validation_fraction and not config.warm_start_from):
    return None, None
  floor = config_checks.min_structured_steps(config.model)
  replicas = (len(strategy.replica_devices(config.cpu_replicas))
              if config.strategy in ('mirrored', 'multi_worker_mirrored')
              else 1)
  batch = config.resolve_global_batch_size(replicas) * config.accumulate_steps
  # 10 epochs of `enough` records are the floor's steps.
  enough = -(-floor * batch // config_checks.DEFAULT_TRAIN_EPOCHS)
  counted = 0
  for path in sources.glob_files(config.train_files):
    counted += _count(path, enough - counted)
    if counted >= enough:
      return None, None
  return (floor, counted) if counted >= MIN_RECORDS else (None, None)


def _count(path, limit):
  """The records of the file at `path`, counted up to `limit` at most (a
  large file is not read through)."""
  if path.endswith(config_checks.CSV_SUFFIXES):
    with table_files.open_bytes(path) as f:
      f.readline()  # The header.
      return sum(1 for _, line in zip(range(limit), f) if line.strip())
  return sum(1 for _ in table_files.records(path).take(limit))


def _common_argv(config):
  """The flags of config's run that each fold run takes: every flag not at
  its default, but for those of _OWN."""
  argv = []
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if ('help' in field.metadata and field.name not in _OWN and
        value is not None and value != field.default):
      argv.append(f'--{field.name}={run_record.shown(value)}')
  return argv


def _start_over_unless_same(directory, common):
  """Keeps the fold runs in `directory` only if they ran with `common`
  (a rerun of the same command resumes them); else removes them."""
  path = os.path.join(directory, 'flags.json')
  if os.path.exists(path):
    with open(path) as f:
      if json.load(f) == common:
        return
    _logger.info('Length: %s ran with other flags; running them again',
                 directory)
    shutil.rmtree(directory)
  os.makedirs(directory, exist_ok=True)
  outputs.write_atomic(path, json.dumps(common, indent=1))


def _run_folds(directory, common, candidates):
  """{steps: [held-out loss of fold 1..FOLDS]}, running the fold runs that
  have not finished, JOBS at a time."""
  runs = [(steps, fold) for steps in candidates
          for fold in range(1, FOLDS + 1)]
  losses, pending, running = {}, [], []
  for steps, fold in runs:
    loss = _finished(_run_dir(directory, steps, fold), steps)
    if loss is None:
      pending.append((steps, fold))
    losses[steps, fold] = loss
  try:
    while pending or running:
      while pending and len(running) < JOBS:
        steps, fold = pending.pop(0)
        running.append((steps, fold, _start(directory, common, steps, fold)))
      steps, fold, process = running.pop(0)
      losses[steps, fold] = _wait(directory, steps, fold, process)
      _logger.info('Length: fold %d of %d at %d steps: held-out loss %.4g '
                   '(%d of %d runs)', fold, FOLDS, steps,
                   losses[steps, fold], sum(
                       loss is not None for loss in losses.values()),
                   len(runs))
  finally:
    for _, _, process in running:  # Interrupted: none left running.
      process.terminate()
      process.wait()
  return {steps: [losses[steps, fold] for fold in range(1, FOLDS + 1)]
          for steps in candidates}


def _run_dir(directory, steps, fold):
  return os.path.join(directory, f'steps{steps}_fold{fold}')


def _finished(model_dir, steps):
  """The held-out loss of the fold run in model_dir if it finished."""
  path = layout.metrics_file(model_dir)
  if not os.path.exists(path):
    return None
  metrics = layout.read_json(path, 'a fold run\'s metrics')
  return (metrics['average_loss'] if metrics.get('global_step') == steps
          else None)


def _start(directory, common, steps, fold):
  model_dir = _run_dir(directory, steps, fold)
  log = open(model_dir + '.log', 'w')  # pylint: disable=consider-using-with
  with log:  # The child holds its own descriptor.
    return subprocess.Popen(
        [sys.executable, '-m', 'estimator_trainer.run', *common,
         f'--model_dir={model_dir}', '--mode=train_and_evaluate',
         '--export=none', f'--train_steps={steps}',
         f'--cv_fold={fold},{FOLDS}'],
        stdout=log, stderr=subprocess.STDOUT)


def _wait(directory, steps, fold, process):
  model_dir = _run_dir(directory, steps, fold)
  process.wait()
  loss = _finished(model_dir, steps)
  if process.returncode or loss is None:
    with open(model_dir + '.log') as f:
      last = [line for line in f.read().splitlines() if line.strip()][-1:]
    if process.returncode == UsageError.exit_code and last:
      # The flags' own (the fold run's are the run's): said as a run says
      # it, not as a fold's failure.
      raise UsageError(last[0].removeprefix(errors.PREFIX))
    raise TrainerError(
        f'choosing the length: the run of fold {fold} at {steps} steps '
        f'failed ({"; ".join(last) or f"exit {process.returncode}"}); its '
        f'output: {model_dir}.log (--train_steps skips the choice)')
  return loss
