"""An Estimator model_dir carried over to the TF2 engines (migrate.py,
tf2/migration.py): training continues as if Estimator went on; the tool's
errors. The SavedModel parity of a carried-over model is in test_export."""

import json
import shlex
import shutil
import sys

import numpy as np
import pytest

from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import TrainerError
from estimator_trainer.tf2 import ctl
from estimator_trainer.tf2 import migration
from cnn_weights import cnn_weights
import cli_config
import warm_process

STEPS, MORE = 20, 10


def _config(model_dir, idx_dir, **overrides):
  return TrainConfig(**{
      'model_dir': str(model_dir), 'dataset': 'mnist',
      'idx_dir': str(idx_dir), 'lr_decay': 'none', 'learning_rate': 0.01,
      'shuffle_buffer': 0, **overrides})


@pytest.mark.parametrize('optimizer, rate, tolerance', [
    ('sgd', 0.02, 1e-6),
    # Adam goes on at its rate: float noise, which its tolerance is, grew
    # to 1.1e-4 at 0.02 (4.6e-5 at 0.01).
    ('adam', 0.01, 1e-4)])
def test_training_continues_as_estimator_would(estimator, tmp_path, mnist_small_dir,
                                               optimizer, rate, tolerance):
  """STEPS Estimator steps, then MORE steps two ways from that checkpoint:
  Estimator's, and ctl's from the carried-over one (the same data order:
  both input pipelines start over, unshuffled). Measured: SGD 0.0, the same
  float32 ops; Adam 3.5e-6, Keras's and tf.compat.v1's Adam computing the
  same update in another order, and dividing by sqrt(v) amplifies that in
  tiny gradients."""
  config = lambda model_dir, **kw: _config(model_dir, mnist_small_dir,
                                           optimizer=optimizer, **kw)
  start = tmp_path / 'estimator'
  estimator.train(config(start, train_steps=STEPS))
  shutil.copytree(start, tmp_path / 'estimator_more')
  # Both go on at `rate`, SGD's another: the flags decide it, not the
  # carried-over checkpoint (ctl kept migrate's 0.01 from it).
  estimator.train(config(tmp_path / 'estimator_more', learning_rate=rate,
                         train_steps=STEPS + MORE))
  migration.convert(config(tmp_path / 'ctl', engine='ctl'), str(start))
  assert ctl.train(config(tmp_path / 'ctl', engine='ctl', learning_rate=rate,
                          train_steps=STEPS + MORE)) == STEPS + MORE

  before = cnn_weights(start)
  went_on, carried = cnn_weights(tmp_path / 'estimator_more'), cnn_weights(
      tmp_path / 'ctl')
  worst = max(float(np.linalg.norm(carried[k] - went_on[k]) /
                    np.linalg.norm(went_on[k] - before[k])) for k in before)
  print(f'{optimizer}: largest relative difference of a variable\'s change '
        f'over {MORE} steps, Estimator vs carried over to ctl: {worst:.1e}')
  assert worst < tolerance


def _migrate(*flags):
  return warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.migrate', *flags], 600)


@pytest.mark.slow
def test_what_cannot_be_carried_over_is_one_line_naming_it(estimator, tmp_path,
                                                           mnist_small_dir):
  """Each refusal names what stops it. The command's usage error here, its
  one-line rendering of the others (exit 1, no traceback) in
  test_a_tf2_engine_on_an_estimator_model_dir_gives_the_command_that_works:
  the refusals themselves in-process, through migrate's own call."""
  source = tmp_path / 'estimator'
  estimator.train(_config(source, mnist_small_dir, optimizer='adam',
                          train_steps=2))
  data = ['--dataset=mnist', f'--idx_dir={mnist_small_dir}']
  result = _migrate(f'--to={tmp_path / "x"}', *data)
  assert 'Traceback' not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      'error: give --from (the Estimator model_dir or checkpoint) and --to '
      '(the new model_dir)')
  assert result.returncode == 2

  def convert(source, to, **overrides):
    # As migrate builds it from its flags: --to is the model_dir.
    return migration.convert(
        _config(to, mnist_small_dir, engine='ctl', **overrides), str(source))

  cases = [
      # Adam's moments are not SGD's.
      ((source, tmp_path / 'sgd', {'optimizer': 'sgd'}),
       f'{source}/model.ckpt-2: cannot place beta1_power and 17 more '
       '(--optimizer=sgd, --model=cnn)'),
      ((tmp_path / 'nothing', tmp_path / 'x', {}),
       f'--from {tmp_path / "nothing"}: no checkpoint there'),
  ]
  for (source_dir, to, overrides), message in cases:
    with pytest.raises(TrainerError) as raised:
      convert(source_dir, to, **overrides)
    assert str(raised.value) == message
  assert not list((tmp_path / 'sgd').glob('ckpt-*'))
  # Carried over once; not again onto its own checkpoint, nor from a TF2 one.
  assert convert(source, tmp_path / 'ctl') == f'{tmp_path / "ctl"}/ckpt-2'
  with pytest.raises(TrainerError) as again:
    convert(source, tmp_path / 'ctl')
  assert str(again.value) == (
      f'--to {tmp_path / "ctl"} holds a checkpoint: carry over into a new '
      'model_dir')
  with pytest.raises(TrainerError) as twice:
    convert(tmp_path / 'ctl', tmp_path / 'y')
  assert str(twice.value) == (
      f'--from {tmp_path / "ctl"}/ckpt-2 is a TF2 engine checkpoint '
      'already: train on its model_dir')


@pytest.mark.slow
def test_a_tf2_engine_on_an_estimator_model_dir_gives_the_command_that_works(
    estimator, tmp_path, mnist_small_dir, capfd):
  """ctl on an Estimator model_dir said `Some objects had attributes which
  were not restored:`; migrate of an SGD Estimator without --optimizer=sgd
  `NotFoundError: Key beta1_power not found in checkpoint`. Now each says
  what is wrong, and the command given carries the run over. The training
  command runs in-process (run.main and its one-line error reporting, as
  test_bad_input's), migrate as the real command: it cannot be imported
  where run is."""
  source = tmp_path / 'estimator'
  estimator.train(_config(source, mnist_small_dir, optimizer='sgd',
                          train_steps=2))
  flags = ['--dataset=mnist', f'--idx_dir={mnist_small_dir}',
           '--optimizer=sgd', '--export=none']
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={source}', '--engine=ctl', '--train_steps=4', *flags],
      capfd)
  assert code == 2, stderr[-3000:]
  last = stderr.strip().splitlines()[-1]
  assert last.startswith(f'error: {source} holds an Estimator checkpoint '
                         '(model.ckpt-2), which --engine=ctl cannot read'), last
  command = shlex.split(last.split('`')[1])
  assert command[:3] == ['python', '-m', 'estimator_trainer.migrate']
  assert '--optimizer=sgd' in command
  to = tmp_path / 'estimator_tf2'

  # Without --optimizer=sgd: the run's own, from its model.json; where no
  # record says it (a model_fn's model_dir), the error naming the flag.
  without_sgd = [flag for flag in command[3:] if flag != '--optimizer=sgd']
  recorded = _migrate(*(flag.replace(str(to), f'{to}_recorded')
                        for flag in without_sgd))
  assert recorded.returncode == 0, recorded.stderr[-3000:]
  assert recorded.stdout.strip() == f'{to}_recorded/ckpt-2'
  record = (source / 'model.json').read_text()
  (source / 'model.json').unlink()
  unrecorded = _migrate(*without_sgd)
  (source / 'model.json').write_text(record)
  assert unrecorded.stderr.strip().splitlines()[-1] == (
      f'error: {source}/model.ckpt-2 holds no Adam slots (no beta1_power): '
      'its Estimator trained with --optimizer=sgd; give migrate '
      '--optimizer=sgd')
  assert unrecorded.returncode == 1
  assert not to.exists()

  carried = _migrate(*command[3:])
  assert carried.returncode == 0, carried.stderr[-3000:]
  assert carried.stdout.strip() == f'{to}/ckpt-2'
  code, stderr = cli_config.main_in_process(
      [f'--model_dir={to}', '--engine=ctl', '--train_steps=4', *flags], capfd)
  assert code == 0, stderr[-3000:]
  assert json.loads((to / 'metrics.json').read_text())['global_step'] == 4


def test_the_optimizer_an_estimator_checkpoint_was_trained_with():
  """migrate names the --optimizer whose slots a checkpoint holds."""
  from estimator_trainer.tf2 import migration  # pylint: disable=g-import-not-at-top
  weights = {'dnn/hidden_0/kernel': [4, 2], 'global_step': []}
  for name, slots in (('adam', ('Adam', 'Adam_1')), ('adagrad', ('Adagrad',)),
                      ('ftrl', ('Ftrl', 'Ftrl_1')), ('sgd', ())):
    stored = {**weights, **{f'dnn/hidden_0/kernel/{slot}': [4, 2]
                            for slot in slots}}
    assert migration._optimizer_of(stored) == name  # pylint: disable=protected-access


@pytest.mark.slow
def test_a_one_command_csv_run_migrates_with_its_own_record(estimator,
                                                            tmp_path):
  """`migrate --from --to` alone carries a one-command CSV run (its data,
  label and spec from --from's model.json, as `run` resumes it: it had
  failed with '--feature_spec needs --train_files', a flag the user never
  gave), and keeps the statistics the model was trained on when the data
  changed since (they had been computed again from the new rows: another
  model's preprocessing), saying so; the carried run trains on with no
  other flag."""
  del estimator
  data = tmp_path / 'data.csv'
  rows = [f'{i % 7 * 0.5},{(i * 3) % 5},{int(i % 7 > 3)}' for i in range(80)]
  data.write_text('a,b,y\n' + '\n'.join(rows) + '\n')
  source = tmp_path / 'estimator'
  result = warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.run', f'--model_dir={source}',
       f'--train_files={data}', '--label_key=y', '--engine=estimator',
       '--train_steps=3', '--export=none'], 600)
  assert result.returncode == 0, result.stderr[-3000:]
  with data.open('a') as f:  # The data change after training.
    f.write('\n'.join(['30.0,4,1'] * 40) + '\n')
  carried = tmp_path / 'carried'
  result = _migrate(f'--from={source}', f'--to={carried}')
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().endswith(str(carried / 'ckpt-3'))
  statistics = 'preprocessing/statistics.json'
  assert json.loads((carried / statistics).read_text()) == json.loads(
      (source / statistics).read_text())
  assert 'the training data differ from these stored statistics' in (
      result.stderr)
  assert 'FutureWarning' not in result.stderr  # Issue 75, item 5.
  result = warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.run', f'--model_dir={carried}',
       '--train_steps=5'], 600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads((carried / 'metrics.json').read_text())[
      'global_step'] == 5
