"""The troubleshooting page (docs/guide/troubleshooting.md) against the
commands: each documented `error: ...` message is produced by a case here,
and the command prints it as its last line, with the exit code the page
gives, no traceback, and nothing written (issue 76).

The page is read, not copied: a message is a backquoted `error: ...` in an
entry's term, where `...`, DIR, FILE and NAME stand for any text and N, M
for a number; its exit code is the `(exit C)` of its entry, else of its
section's heading. A documented message needs a case or a reason in
NOT_RUN, and a case's message must be on the page.
"""

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import layout
from estimator_trainer import stack
import cli_config
import warm_process
from test_bad_input import PNG, PNG_EVAL, SLIM_FORMAT, SLIM_KEYS, TABULAR
from test_bad_input import _our_model_checkpoint, _png_tfrecords
from test_bad_input import _snapshot, _tabular

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGE = REPO / 'docs' / 'guide' / 'troubleshooting.md'


@dataclasses.dataclass(frozen=True)
class Entry:
  term: str
  messages: tuple  # Its backquoted `error: ...` messages.
  code: int  # None: the page gives none.
  during_training: bool


def _entries():
  """The page's definition list: each term, its messages and exit code."""
  entries, section = [], ''
  lines = PAGE.read_text().splitlines()
  for index, line in enumerate(lines[:-1]):
    if line.startswith('## '):
      section = line
    if not (line.strip() and lines[index + 1].startswith(':   ')):
      continue
    definition = []
    for rest in lines[index + 1:]:
      if rest and not rest.startswith((':   ', '    ')):
        break
      definition.append(rest)
    code = (re.search(r'\(exit (\d+)\)', ' '.join(definition)) or
            re.search(r'\(exit (\d+)', section))
    entries.append(Entry(
        line, tuple(m.strip() for m in re.findall(r'`(error: [^`]+)`', line)),
        int(code.group(1)) if code else None,
        section.startswith('## During training')))
  return entries


ENTRIES = _entries()
DOCUMENTED = {message: entry for entry in ENTRIES
              for message in entry.messages}


def _pattern(message):
  """The regular expression of a documented message."""
  pattern = re.escape(message).replace(r'\.\.\.', '.*')
  pattern = re.sub(r'\b(DIR|FILE|NAME)\b', '.+', pattern)
  return re.sub(r'\b[NM]\b', r'\\d+', pattern)


# Documented lines no case here produces, by their message or (an entry of
# no `error: ...` message) the start of their term, and why.
NOT_RUN = {
    "`ModuleNotFoundError: No module named 'absl'`":
        "Python's own error, before any of the package's code runs",
    'An IDX file error naming the file':
        "described, not quoted: test_bad_input.py's idx-* cases",
    'A TFDS download that fails':
        'needs a machine without internet: test_bad_input.py\'s '
        'test_tfds_offline_fails_after_a_few_retries_per_file',
    'Structured data: an error naming the file':
        "described, not quoted: test_bad_input.py's tabular-* cases",
    'error: no training step in 600 s: a cluster task never started or died '
    '(--cluster_timeout_secs)':
        'a cluster task whose peer never starts, killed by its watchdog '
        'after the timeout: test_cluster_runs.py',
    'error: a peer of this multi_worker_mirrored task stopped or became '
    'unreachable while training, which ends training for every task: '
    'restart the whole cluster; it resumes from the latest checkpoint':
        'a cluster with a task killed while training (slow, serial): '
        'test_faults.py',
    "error: a parameter server of this cluster stopped or became "
    "unreachable while training, which ends the chief's training: restart "
    "the chief once the parameter servers are up; it resumes from the "
    "latest checkpoint":
        "a TF2 chief's UnavailableError under parameter servers, unit-level: "
        'test_peer_lost.py',
    '`Batch norm momentum': 'warnings, not errors: test_batch_norm.py',
    '`Training already finished': 'not an error (exit 0): '
                                  'test_finished_runs.py',
    '`Preempted at step N': 'not an error (SIGTERM, exit 0): test_faults.py',
    'A pause of tens of seconds': 'a pause, not a message',
    'A warning that the task': 'a warning, not an error: test_listen.py',
}


@dataclasses.dataclass(frozen=True)
class Case:
  """A command that fails with a documented message. argv may name {tmp},
  {model_dir} ({tmp}/model), {data} ({tmp}/data, where `setup` writes) and
  {mnist} (an IDX dir of Fashion-MNIST). `command`: a module run as
  `python -m` in this process (run) or a warm process, or a script."""

  argv: tuple
  setup: object = None
  env: tuple = ()
  command: str = 'estimator_trainer.run'
  marks: tuple = (pytest.mark.both_stacks,)


def _fake_python(tmp):
  """{tmp}/python: a Python 3.10 as setup_env.sh's version check sees it."""
  path = tmp / 'python'
  path.write_text('#!/bin/sh\necho "AssertionError: 3.10.12" >&2\nexit 1\n')
  path.chmod(0o755)


def _my_models(tmp):
  """{data}/my_models.py: a builder of a batch norm with renorm, no mlp2."""
  (tmp / 'data' / 'my_models.py').write_text(
      'import tensorflow as tf\n\n\n'
      'def renorm(input_shape, num_classes):\n'
      '  inputs = tf.keras.Input(input_shape)\n'
      '  x = tf.keras.layers.Flatten()(inputs)\n'
      '  x = tf.keras.layers.BatchNormalization(renorm=True)(x)\n'
      '  return tf.keras.Model(inputs, tf.keras.layers.Dense(num_classes)(x))'
      '\n')


def _resnet20_run(tmp):
  """{model_dir}: a resnet20 run's record and checkpoint state."""
  model_dir = tmp / 'model'
  model_dir.mkdir()
  (model_dir / layout.MODEL_FILE).write_text(json.dumps(
      {'model': 'resnet20', 'run': {'model': 'resnet20'}}))
  (model_dir / 'checkpoint').write_text(
      'model_checkpoint_path: "model.ckpt-10"\n')


def _own_builder_run(tmp):
  """{model_dir}: the record of a run of the page's own builder."""
  model_dir = tmp / 'model'
  model_dir.mkdir()
  run = {'model': 'my_models:mlp', 'model_kwargs': {'hidden': 256}}
  (model_dir / layout.MODEL_FILE).write_text(json.dumps({**run, 'run': run}))


def _config_file(content):
  def setup(tmp):
    (tmp / 'data' / 'hparams.yaml').write_text(content)
  return setup


def _tfrecords_without_spec(tmp):
  _png_tfrecords(tmp)
  (tmp / 'data' / 'png' / 'dataset_spec.json').unlink()


def _not_a_dataset_spec(tmp):
  _png_tfrecords(tmp)
  (tmp / 'data' / 'png' / 'dataset_spec.json').write_text('{}')


def _label_out_of_range_after_the_first(tmp):
  """{data}/png/train.tfrecord's records past the first have label 3."""
  _png_tfrecords(tmp)
  images = np.random.default_rng(1).integers(0, 256, (8, 32, 32, 3))
  with tf.io.TFRecordWriter(str(tmp / 'data/png/train.tfrecord')) as f:
    for index, image in enumerate(images):
      f.write(SLIM_FORMAT.encode(image, 3 if index else 0, 'png'))


def _income_word(tmp):
  """{data}/income.csv: numbers in 'income', then the word 'unknown'."""
  rows = [f'{i}.5,{"yes" if i % 2 else "no"}' for i in range(20)]
  (tmp / 'data' / 'income.csv').write_text(
      '\n'.join(['income,answer', *rows, 'unknown,no']) + '\n')


SPEC = '--feature_spec={data}/tab/spec.json'
DIVERGED = ('error: loss is NaN at step N: training diverged (a lower '
            '--learning_rate may help); ')
# The weights gone first (a checkpoint due refuses them).
WEIGHTS = ('error: weights are NaN or Inf at step N: training diverged (a '
           'lower --learning_rate may help); ')
GOOD = (*TABULAR, SPEC, '--optimizer=sgd')
# Without the dnn's default L2, whose square of the blown-up weights would
# make the loss Inf (the same error, 'loss is Inf'), not the page's NaN.
BLOWN_UP = (*GOOD, '--learning_rate=1e38', '--weight_decay=0')
# canned's network (no periodic embedding): the loss goes NaN first. (The
# cases' flags are format()ed: braces doubled.)
LOSS_FIRST = (*BLOWN_UP, '--model_kwargs={{"numeric_embedding": false}}')
# The last step's update makes the weights infinite while its loss (of the
# weights before it) is finite: the save due at the end refuses them, on
# any CPU (after 1e38's blown-up frequencies, whether the loss or the
# weights went first differed by machine: a cosine of a huge number).
LAST_STEP_BLOWN_UP = (*GOOD, '--learning_rate=inf', '--weight_decay=0')


def _two_good_steps(*flags):
  """The setup of {model_dir}: a run of 2 steps on {data}/tab, checkpointed
  (with `flags`: the model's, which its resume repeats)."""

  def setup(tmp):
    _tabular()(tmp)
    paths = {'data': tmp / 'data'}
    cli_config.run_in_process([f'--model_dir={tmp / "model"}', *(
        arg.format(**paths) for arg in (*GOOD, *flags))])

  return setup


def _model_dir_in_use(tmp):
  """{tmp}/model's lock, held by a run on another host, renewed now."""
  (tmp / 'model').mkdir()
  (tmp / 'model' / layout.LOCK_FILE).write_text(json.dumps(
      {'host': 'elsewhere', 'pid': 7, 'since': '2026-12-06 10:00:00 UTC',
       'command': 'python -m estimator_trainer.run', 'heartbeat': time.time(),
       'cluster': None}))


MNIST = ('--dataset=mnist', '--idx_dir={mnist}', '--train_steps=2')
# By documented message; the exit code is the page's.
CASES = {
    'error: needs Python 3.11; set PYTHON=': Case(
        (), _fake_python, (('PYTHON', '{tmp}/python'),
                           ('VENV', '{tmp}/venv')),
        command='scripts/setup_env.sh'),
    'error: --engine=estimator (on DIR: ...migrate... carries an Estimator '
    'model_dir over to the TF2 engines) needs TensorFlow 2.15 with '
    'tensorflow-estimator (tf.estimator is gone from TensorFlow 2.16); this '
    'is TensorFlow 2.21.0 ...': Case(
        ('--engine=estimator', *MNIST), marks=(
            pytest.mark.both_stacks, pytest.mark.skipif(
                stack.has_estimator(), reason='this stack has Estimator'))),
    'error: --NAME must be one of ...; got ...': Case(
        ('--strategy=horovod',)),
    'error: --NAME must be > 0, got ...': Case(('--train_steps=0',)),
    'error: give --train_steps or --train_epochs, not both': Case(
        (*MNIST, '--train_epochs=1')),
    "error: --config FILE: unknown flag 'NAME'": Case(
        ('--config={data}/hparams.yaml',), _config_file('stepz: 10\n')),
    'error: --config FILE: not valid JSON/YAML (...)': Case(
        ('--config={data}/hparams.yaml',), _config_file('steps: [10\n')),
    'error: --model my_models:mlp2: my_models has no mlp2': Case(
        (*MNIST, '--model=my_models:mlp2'), _my_models),
    'error: --model=cnn disagrees with DIR, whose checkpoints are of '
    '--model=resnet20 (its model.json): ...': Case(
        (*MNIST, '--model=cnn'), _resnet20_run),
    'error: DIR holds a run of --model=my_models:mlp, a builder of your own '
    '(its model.json): give --model=my_models:mlp to run it ...': Case(
        ('--model_dir={model_dir}', '--mode=evaluate'), _own_builder_run),
    'error: DIR holds an Estimator checkpoint (model.ckpt-N), which '
    '--engine=ctl cannot read: carry it over ...': Case(
        (*MNIST, '--engine=ctl'), _our_model_checkpoint),
    'error: TFRecords need dataset_spec.json beside them (...) or '
    '--image_shape=H,W,C and --num_classes': Case(
        (*PNG, PNG_EVAL, *SLIM_KEYS), _tfrecords_without_spec),
    'error: DIR is in use by another training run (host NAME, pid N, '
    'since ...); let it finish or stop it, or give another --model_dir '
    '(...)': Case(MNIST, _model_dir_in_use),
    'error: TF_CONFIG: ...': Case(
        (*MNIST,), env=(('TF_CONFIG', '{{"cluster": '),)),
    'error: --bn_recompute_batches: batch-norm layer ...': Case(
        (*MNIST, '--model=my_models:renorm', '--bn_recompute_batches=2'),
        _my_models),
    "error: no feature 'image' (--image_key) in the first record of FILE; "
    "its features: 'image/class/label', 'image/encoded'": Case(
        (*PNG, PNG_EVAL, '--label_key=image/class/label'), _png_tfrecords),
    'error: ... it is [32, 32, 3] (3 channels, not 1: images are not '
    'converted); give --image_shape=32,32,3 (or fix dataset_spec.json)': Case(
        (*PNG, PNG_EVAL, *SLIM_KEYS, '--image_shape=28,28,1'),
        _png_tfrecords),
    'error: InvalidArgumentError: assertion failed: [image/class/label: '
    'label outside [0, 3) in] [FILE] ...': Case(
        (*PNG, PNG_EVAL, *SLIM_KEYS), _label_out_of_range_after_the_first),
    'error: FILE: not a dataset spec (KeyError: ...)': Case(
        (*PNG, PNG_EVAL, *SLIM_KEYS), _not_a_dataset_spec),
    "error: FILE line N, column 'income': 'unknown' is not a number "
    '(--unreadable_as_missing reads such cells as missing)': Case(
        ('--train_files={data}/income.csv', '--label_key=answer',
         '--train_steps=2'), _income_word),
    'error: FILE line N: a carriage return (\\r) inside the line; a record '
    'is one line, ended by \\n or \\r\\n': Case(
        (*TABULAR, SPEC), _tabular(train=[('1.0', 're\rd', 'no')])),
    'error: no training records in FILE (a header only)': Case(
        (*TABULAR, SPEC), _tabular(header_only=['train'])),
    'error: no evaluation records in FILE (a header only)': Case(
        (*TABULAR, SPEC), _tabular(header_only=['eval'])),
    'error: FILE: no records to infer a spec from (a header only)': Case(
        ('--train_files={data}/tab/train.csv', '--label=answer',
         '--output={data}/spec.json'), _tabular(header_only=['train']),
        command='estimator_trainer.tabular.infer'),
    f'{DIVERGED}the latest checkpoint is still ...ckpt-M': Case(
        (*LOSS_FIRST, '--train_steps=4'), _two_good_steps(LOSS_FIRST[-1])),
    f'{DIVERGED}no checkpoint was saved': Case(LOSS_FIRST, _tabular()),
    f'{WEIGHTS}the latest checkpoint is still ...ckpt-M': Case(
        (*LAST_STEP_BLOWN_UP, '--train_steps=3'), _two_good_steps()),
    f'{WEIGHTS}no checkpoint was saved': Case(
        (*LAST_STEP_BLOWN_UP, '--train_steps=1'), _tabular()),
}


def test_every_documented_message_has_a_case_or_a_reason():
  """A new entry of the page needs a case here (or a reason not to run
  one); a case's message must be the page's, with its exit code."""
  others = [entry.term for entry in ENTRIES if not entry.messages]
  assert set(DOCUMENTED) - set(CASES) - set(NOT_RUN) == set()
  assert [term for term in others
          if not any(term.startswith(key) for key in NOT_RUN)] == []
  assert set(CASES) - set(DOCUMENTED) == set()
  assert not set(CASES) & set(NOT_RUN)
  assert [key for key in NOT_RUN if key not in DOCUMENTED and not any(
      term.startswith(key) for term in others)] == []
  assert [message for message in CASES
          if DOCUMENTED[message].code is None] == []


def _run(case, argv, env, capfd):
  """(exit code, stderr) of the case's command."""
  if case.command == 'estimator_trainer.run':
    return cli_config.main_in_process(argv, capfd, env)
  if case.command.endswith('.sh'):
    command = ['bash', str(REPO / case.command), *argv]
    result = subprocess.run(command, env={**os.environ, **env}, cwd=REPO,
                            capture_output=True, text=True, timeout=60,
                            check=False)
  else:
    result = warm_process.run([sys.executable, '-m', case.command, *argv],
                              300, {**os.environ, **env})
  return result.returncode, result.stderr


@pytest.mark.parametrize('message', [
    pytest.param(message, marks=case.marks,
                 id=f'{message[7:37]}...{message[-20:]}')
    for message, case in CASES.items()])
def test_the_documented_message_and_exit_code(message, tmp_path,
                                              mnist_small_dir, capfd,
                                              monkeypatch):
  case, entry = CASES[message], DOCUMENTED[message]
  paths = {'tmp': tmp_path, 'model_dir': tmp_path / 'model',
           'data': tmp_path / 'data', 'mnist': mnist_small_dir}
  paths['data'].mkdir()
  if case.setup:
    case.setup(tmp_path)
  argv = [arg.format(**paths) for arg in case.argv]
  if case.command == 'estimator_trainer.run':
    argv.insert(0, f'--model_dir={paths["model_dir"]}')
  env = {name: value.format(**paths) for name, value in case.env}
  # A builder module of {data} imported, as from the working directory,
  # leaving no bytecode behind: nothing but the command may write.
  monkeypatch.syspath_prepend(str(paths['data']))
  monkeypatch.setattr(sys, 'dont_write_bytecode', True)
  resumed = (paths['model_dir'] / 'checkpoint').exists()
  before = _snapshot(tmp_path)
  code, stderr = _run(case, argv, env, capfd)
  sys.modules.pop('my_models', None)
  lines = stderr.strip().splitlines() or ['']
  assert re.fullmatch(_pattern(message), lines[-1]), stderr[-3000:]
  assert 'Traceback' not in stderr
  assert code == entry.code, stderr[-3000:]
  if not (entry.during_training and resumed):
    # A resumed run that failed in training keeps its checkpoints (the page
    # names the latest); any other failed command writes nothing.
    after = _snapshot(tmp_path)
    assert after == before
