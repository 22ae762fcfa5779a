"""Real clusters of trainer processes on loopback, via the local launcher."""

import collections
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import early_stopping
from estimator_trainer import export_policy
from estimator_trainer import layout
from conftest import MNIST_SMALL_TEST_EXAMPLES, write_small_mnist
from cluster_launch import (LAUNCHER, launch, launched_cluster, restart_alone,
                            restart_alone_in_process, task_lines)
import cli_config
import cnn_weights
import lease_holder
import serve_export
import scripts_dir
import warm_process

# Clusters on free ports, picked before they bind; their tasks race.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

launcher = scripts_dir.load('local_cluster')


def _flags(model_dir, idx_dir, *extra):
  return [f'--model_dir={model_dir}', '--dataset=mnist', f'--idx_dir={idx_dir}',
          '--cluster_timeout_secs=120', *extra]


def test_a_missing_worker_fails_within_the_timeout(tmp_path, mnist_small_dir):
  """Worker 1 never starts: worker 0 must give up, not hang."""
  tf_config = {'cluster': {'worker': ['127.0.0.1:1', '127.0.0.1:2']},
               'task': {'type': 'worker', 'index': 0}}
  # Port 1 is privileged and unused; pick a free one for worker 0 instead.
  port, = launcher.free_ports(1)
  tf_config['cluster']['worker'][0] = f'127.0.0.1:{port}'
  start = time.monotonic()
  result = warm_process.run(
      [sys.executable, '-m', 'estimator_trainer.run',
       *_flags(tmp_path, mnist_small_dir, '--strategy=multi_worker_mirrored',
               '--train_steps=50')[:-1], '--cluster_timeout_secs=20'],
      300, {**os.environ, 'TF_CONFIG': json.dumps(tf_config)})
  elapsed = time.monotonic() - start
  assert result.returncode == -9  # Killed by its watchdog.
  assert result.stderr.strip().splitlines()[-1] == (
      'error: no training step in 20 s: a cluster task never started or '
      'died (--cluster_timeout_secs)')
  assert elapsed < 20 + 60  # The timeout plus start-up, never a hang.
  assert not (tmp_path / 'metrics.json').exists()


@pytest.mark.estimator
def test_workers_read_disjoint_shards_covering_the_split(tmp_path,
                                                         mnist_small_dir):
  """One epoch over 2 worker processes: every example read exactly once."""
  from estimator_trainer import sources  # pylint: disable=g-import-not-at-top
  helper = pathlib.Path(__file__).with_name('read_shard.py')
  cluster, tasks = launcher.make_cluster(False, 2, 0, False)
  procs = []
  for task_type, index in tasks:
    tf_config = json.dumps({'cluster': cluster,
                            'task': {'type': task_type, 'index': index}})
    procs.append(subprocess.Popen(
        [sys.executable, str(helper), str(tmp_path / f'{index}.json'),
         str(mnist_small_dir), '10000'],
        env={**os.environ, 'TF_CONFIG': tf_config},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  for proc in procs:
    output = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, output[-3000:]
  shards = [json.loads((tmp_path / f'{i}.json').read_text())
            for i in range(2)]
  assert [len(s) for s in shards] == [5000, 5000]
  source = sources.IdxSource('mnist', str(mnist_small_dir))
  # The pipeline's scaling, a batch at a time: an op per example cost ~1.5
  # CPU-s.
  everything = collections.Counter(
      hashlib.sha1(x.tobytes()).hexdigest()
      for images, _ in source.dataset(sources.TRAIN).batch(10000)
      for x in (tf.cast(images, tf.float32) / 255.0).numpy())
  assert collections.Counter(shards[0]) + collections.Counter(
      shards[1]) == everything


# The test split of mnist_short_eval_dir.
SHORT_EVAL_EXAMPLES = 200


@pytest.fixture(scope='module')
def mnist_short_eval_dir(tmp_path_factory, fashion_mnist_dir):
  """mnist_small_dir with a test split of SHORT_EVAL_EXAMPLES: the workers of
  a cluster with an evaluator train on while each evaluation runs, so each
  evaluation 10x shorter is steps fewer in both."""
  return write_small_mnist(tmp_path_factory.mktemp('mnist_short_eval'),
                           fashion_mnist_dir, SHORT_EVAL_EXAMPLES)


@pytest.mark.estimator
def test_early_stopping_in_a_multi_worker_cluster(tmp_path,
                                                  mnist_short_eval_dir):
  """The evaluator ends on the evaluation that meets the rule (metrics.json
  and the last export are of it); both workers, which follow its
  evaluations, stop together soon after. And what any cluster of 2 workers
  and an evaluator TF_CONFIG lists does (the evaluator TF_CONFIG lists
  not: test_one_task_evaluates_and_exports_the_end_when_no_tf_config_lists_it)."""
  model_dir = tmp_path / 'model'
  result = launch(['--workers=2', '--evaluator'], _flags(
      model_dir, mnist_short_eval_dir, '--strategy=multi_worker_mirrored',
      '--optimizer=sgd', '--learning_rate=1e-12', '--lr_decay=none',
      '--train_steps=2000', '--save_checkpoints_steps=20',
      '--throttle_secs=0', '--early_stopping_evals=1', '--export=latest'))
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'exit codes: worker:0=0, worker:1=0, evaluator:0=0' in result.stdout
  assert set(task_lines(result.stdout, 'Early stopping requested')) == {
      'worker:0', 'worker:1'}
  # Each worker reads its own half of the data.
  assert set(task_lines(result.stdout, 'Input pipeline 0 of 2')) == {
      'worker:0'}
  assert set(task_lines(result.stdout, 'Input pipeline 1 of 2')) == {
      'worker:1'}
  # Checkpoints in model_dir come from the chief (worker 0) only, and the
  # other worker's scratch directory is gone.
  assert set(task_lines(result.stdout, f'into {model_dir}/model.ckpt')) == {
      'worker:0'}
  assert not list(model_dir.glob('tmp_*'))
  # One training event file in model_dir: the chief's.
  assert len(list(model_dir.glob('events.out.tfevents.*'))) == 1
  # The evaluator evaluated while training ran, exported (nobody else
  # does) and wrote the final metrics.
  assert set(task_lines(result.stdout, 'Final evaluation')) == {
      'evaluator:0'}
  assert set(task_lines(result.stdout, 'Exported a SavedModel to')) == {
      'evaluator:0'}
  assert list((model_dir / 'eval').glob('events.out.tfevents.*'))
  # The evaluator TF_CONFIG lists leaves no announcement behind.
  assert not (model_dir / layout.EVALUATOR_FILE).exists()
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] < 2000
  assert metrics['num_examples'] == SHORT_EVAL_EXAMPLES
  # The rule is met at metrics.json's evaluation, not before it.
  accuracies = early_stopping.eval_accuracies(str(model_dir / 'eval'))
  steps = sorted(step for step in accuracies
                 if step <= metrics['global_step'])
  met = [early_stopping.evaluations_since_best(
      {step: accuracies[step] for step in steps[:n]}) >= 1
         for n in range(1, len(steps) + 1)]
  assert met[-1] and not any(met[:-1]), (steps, accuracies)
  exports = sorted((model_dir / 'export' / 'latest').iterdir(),
                   key=lambda path: int(path.name))
  # An export after each evaluation (the rule needs 2); the last of the
  # evaluation that met it.
  assert len(exports) >= 2
  assert all((path / 'saved_model.pb').exists() for path in exports)
  record = json.loads((exports[-1] / export_policy.RECORD).read_text())
  assert record['global_step'] == metrics['global_step']
  assert layout.checkpoint_step(tf.train.latest_checkpoint(
      str(model_dir))) >= metrics['global_step']


@pytest.mark.default_stack_only
def test_tf2_precise_batch_norm_and_early_stopping_in_a_multi_worker_cluster(
    tmp_path, mnist_small_dir):
  """--bn_recompute_batches across 2 workers: each worker recomputes before
  its save, and the chief's checkpoint holds the statistics that one
  process saves: those of the same first global batches, with the same
  weights (the seeded initial ones: SGD at a rate of 1e-30; the workers'
  shards make other training batches than one process's stream).

  And early stopping without an evaluator task, in the same cluster: each
  worker decides from the evaluation they run together, so both stop at
  the same step (apart, the all-reduce would hang). The weights never
  change: the first evaluation (step 2) stays the best, and the rule is met
  2 checkpoints later."""
  flags = ['--engine=ctl', '--model=builders:bn_cnn', '--global_batch_size=64',
           '--optimizer=sgd', '--learning_rate=1e-30', '--lr_decay=none',
           '--save_checkpoints_steps=2', '--bn_recompute_batches=2',
           '--export=none']
  tests_dir = str(pathlib.Path(__file__).parent)
  result = subprocess.run(
      [sys.executable, str(LAUNCHER), '--workers=2', '--', *_flags(
          tmp_path / 'cluster', mnist_small_dir,
          '--strategy=multi_worker_mirrored', *flags, '--train_steps=2000',
          '--throttle_secs=0', '--early_stopping_evals=2')],
      capture_output=True, text=True, timeout=600, check=False,
      env={**os.environ, 'PYTHONPATH': tests_dir})
  assert result.returncode == 0, result.stdout[-5000:]
  assert set(task_lines(result.stdout, 'Recomputed the moving statistics')
             ) == {'worker:0', 'worker:1'}
  assert set(task_lines(result.stdout, 'Early stopping: no better')) == {
      'worker:0', 'worker:1'}
  metrics = json.loads((tmp_path / 'cluster' / 'metrics.json').read_text())
  assert metrics['global_step'] == 6
  # The one-process run in this one: a process of its own would check
  # nothing more, at the cost of a TensorFlow import.
  cli_config.run_in_process(_flags(tmp_path / 'alone', mnist_small_dir,
                                   *flags, '--train_steps=2'))
  cluster, one = (tf.train.load_checkpoint(str(tmp_path / run / 'ckpt-2'))
                  for run in ('cluster', 'alone'))
  names = [name for name in cluster.get_variable_to_shape_map()
           if 'moving_' in name]
  assert len(names) == 4  # bn1 and bn2, mean and variance.
  for name in names:
    np.testing.assert_allclose(cluster.get_tensor(name), one.get_tensor(name),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('engine, evaluator', [
    ('ctl', True), pytest.param('keras', False, marks=pytest.mark.both_stacks)])
def test_tf2_parameter_servers(tmp_path, mnist_small_dir, engine, evaluator):
  """TensorFlow 2's ParameterServerStrategy: the chief's ClusterCoordinator
  sends the steps to the worker; an evaluator task, or else the chief,
  evaluates the checkpoints. With --ema_decay (the worker's step updates
  the average on the ps), what they evaluate is the average. One worker:
  every worker runs the same code (cluster_roles.serve), and a second
  costs a TensorFlow process."""
  model_dir = tmp_path / 'model'
  result = launch(
      ['--chief', '--workers=1', '--ps=1',
       *(['--evaluator'] if evaluator else [])],
      _flags(model_dir, mnist_small_dir, f'--engine={engine}',
             '--strategy=parameter_server', '--train_steps=140',
             '--save_checkpoints_steps=50', '--export=latest',
             '--ema_decay=0.9'))
  assert result.returncode == 0, result.stdout[-5000:]
  codes = 'chief:0=0, worker:0=0, ps:0=0' + (
      ', evaluator:0=0' if evaluator else '')
  assert f'exit codes: {codes}' in result.stdout
  # The chief alone saves, at exact steps: it joins the workers' closures
  # (ctl) or Keras does at the end of each fit; the last step no multiple
  # of 50 (keras trained to 150 in epochs of 50).
  assert set(task_lines(result.stdout, 'Saved checkpoint')) == {'chief:0'}
  assert sorted(p.name for p in model_dir.glob('ckpt-*.index')) == [
      'ckpt-100.index', 'ckpt-140.index', 'ckpt-50.index']
  # The worker and the ps serve until the chief has trained to the end.
  assert set(task_lines(result.stdout, 'Training finished at step 140')) == {
      'worker:0', 'ps:0'}
  evaluating = 'evaluator:0' if evaluator else 'chief:0'
  assert set(task_lines(result.stdout, 'Final evaluation')) == {evaluating}
  assert set(task_lines(result.stdout, 'Exported a SavedModel to')) == {
      evaluating}
  assert len(list(model_dir.glob('export/latest/*/saved_model.pb'))) >= 1
  assert list((model_dir / 'eval').glob('events.out.tfevents.*'))
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 140 and (
      metrics['num_examples'] == MNIST_SMALL_TEST_EXAMPLES)
  assert metrics['accuracy'] > 0.7  # Fashion-MNIST: 0.79 (ctl), 0.80 (keras).
  print(f'{engine}, parameter servers, evaluated by {evaluating}: accuracy '
        f'{metrics["accuracy"]:.4f} at step 140')
  averages = cnn_weights.tf2_averages(model_dir / 'ckpt-140')
  assert metrics['average_loss'] == pytest.approx(
      cnn_weights.mean_test_loss(averages, mnist_small_dir), rel=1e-4)
  # What was evaluated and exported is the average, not the weights: told
  # apart by the logits, since the two losses can be as close as the
  # tolerance above (8.7e-5 apart in one run of twenty).
  exported = serve_export.logits(mnist_small_dir, max(
      (model_dir / 'export' / 'latest').iterdir(), key=lambda p: int(p.name)))
  averaged, raw = (cnn_weights.test_logits(values, mnist_small_dir, 100)[0]
                   for values in (averages, cnn_weights.tf2_weights(
                       model_dir / 'ckpt-140')))
  np.testing.assert_allclose(exported, averaged, atol=1e-4)
  print(f'logits: exported vs averages {np.abs(exported - averaged).max():.1e},'
        f' vs weights {np.abs(exported - raw).max():.1e}')
  assert np.abs(exported - raw).max() > 10 * 1e-4


def test_tf2_a_listed_evaluator_evaluates_and_the_worker_does_not(tmp_path, mnist_small_dir):
  """A listed evaluator task under multi_worker_mirrored (keras). One worker:
  every worker decides alike from TF_CONFIG not to evaluate
  (controller.engine_modes), and a second costs a TensorFlow process; keras
  across 2 workers is test_clip_and_accumulate's cluster."""
  model_dir = tmp_path / 'model'
  result = launch(['--workers=1', '--evaluator'], _flags(
      model_dir, mnist_small_dir, '--engine=keras',
      '--strategy=multi_worker_mirrored', '--train_steps=20',
      '--save_checkpoints_steps=10', '--steps_per_loop=10'))
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'exit codes: worker:0=0, evaluator:0=0' in result.stdout
  # The worker trains without evaluating; the evaluator evaluates, exports
  # and writes the results.
  assert not task_lines(result.stdout, 'Evaluation at step').keys() - {
      'evaluator:0'}
  assert set(task_lines(result.stdout, 'Final evaluation')) == {
      'evaluator:0'}
  assert set(task_lines(result.stdout, 'Exported a SavedModel to')) == {
      'evaluator:0'}
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 20 and (
      metrics['num_examples'] == MNIST_SMALL_TEST_EXAMPLES)


@pytest.mark.estimator
def test_one_task_evaluates_and_exports_the_end_when_no_tf_config_lists_it(
    tmp_path, mnist_small_dir):
  """Issue 47, item 9: with TF_CONFIG as TensorFlow's train_and_evaluate
  documentation writes it (no task's cluster lists the evaluator), the
  chief evaluated and exported the final checkpoint as the evaluator did,
  and the evaluator failed 2 runs in 3 (AlreadyExistsError). The evaluator
  announces itself in the model_dir; the chief leaves the end to it. (The
  evaluator TF_CONFIG lists: test_early_stopping_in_a_multi_worker_cluster.)
  One worker, the chief: the others never evaluate, and the evaluator ends
  on the chief's finished mark (training_progress.chief_finished); a second
  costs a TensorFlow process (2 workers: the early-stopping test)."""
  model_dir = tmp_path / 'model'
  result = launch(['--workers=1', '--unlisted_evaluator'], _flags(
      model_dir, mnist_small_dir, '--strategy=multi_worker_mirrored',
      '--train_steps=60', '--save_checkpoints_steps=30'))
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'exit codes: worker:0=0, evaluator:0=0' in result.stdout
  assert set(task_lines(result.stdout, 'Final evaluation')) == {
      'evaluator:0'}
  assert set(task_lines(result.stdout, 'Exported a SavedModel to')) == {
      'evaluator:0'}
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1
  metrics = json.loads((model_dir / 'metrics.json').read_text())
  assert metrics['global_step'] == 60
  assert metrics['accuracy'] > 0.5  # The cluster trained (0.75 here).
  assert not (model_dir / layout.EVALUATOR_FILE).exists()


@pytest.mark.estimator
def test_the_chief_evaluates_the_end_when_the_announced_evaluator_was_killed(
    tmp_path, mnist_small_dir):
  """Issue 73, item 3: an evaluator SIGKILLed with its heartbeat process
  left evaluator.json, and the chief left the final evaluation and export
  to it: no metrics.json. The file is a stale lease now (its pid gone from
  this host): the chief says so in a line and evaluates and exports."""
  model_dir = tmp_path / 'model'
  evaluator = lease_holder.start('evaluator', model_dir,
                                 start_new_session=True)
  os.killpg(evaluator.pid, signal.SIGKILL)
  evaluator.wait()
  assert (model_dir / layout.EVALUATOR_FILE).exists()
  result = launch(['--workers=1'], _flags(
      model_dir, mnist_small_dir, '--strategy=multi_worker_mirrored',
      '--train_steps=20', '--save_checkpoints_steps=20'))
  assert result.returncode == 0, result.stdout[-5000:]
  assert set(task_lines(result.stdout, 'Final evaluation')) == {'worker:0'}
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1
  assert json.loads((model_dir / 'metrics.json').read_text())[
      'global_step'] == 20
  ignored = task_lines(result.stdout, f'Ignored {model_dir}/'
                       f'{layout.EVALUATOR_FILE} of an evaluator task (host')
  assert {task: len(lines) for task, lines in ignored.items()} == {
      'worker:0': 1}


def _files(model_dir):
  return {str(path.relative_to(model_dir)): path.stat().st_mtime_ns
          for path in model_dir.rglob('*') if path.is_file()}


@pytest.mark.default_stack_only
def test_tf2_training_tasks_evaluate_when_no_tf_config_lists_the_evaluator(
    tmp_path, mnist_small_dir, caplog):
  """Issue 47, item 9, the TF2 engines: their workers decide who evaluates
  as they start, all alike, so an evaluator no TF_CONFIG lists cannot
  announce itself in time; it says so and exits 0, and the chief alone
  evaluates and exports the end (both did). Restarted after the end, each
  worker has nothing to do and exits 0 at once, its peers gone: worker 1 a
  process (the CLI's part: exit 0 through the listen shim), the chief in
  this one (the engine's part is all it adds, a TensorFlow import less).
  One worker trains: every worker decides alike from TF_CONFIG, which lists
  no evaluator (controller.engine_modes), and a second costs a TensorFlow
  process (ctl's 2 workers: the precise batch norm test; their collective
  evaluation and chief-only export: test_clip_and_accumulate's keras
  cluster, whose controller code ctl shares)."""
  model_dir = tmp_path / 'model'
  flags = _flags(model_dir, mnist_small_dir, '--engine=ctl',
                 '--strategy=multi_worker_mirrored', '--train_steps=40',
                 '--save_checkpoints_steps=20', '--steps_per_loop=10')
  result = launch(['--workers=1', '--unlisted_evaluator'], flags)
  assert result.returncode == 0, result.stdout[-5000:]
  assert 'exit codes: worker:0=0, evaluator:0=0' in result.stdout
  assert set(task_lines(result.stdout, 'This evaluator is in no TF_CONFIG')
             ) == {'evaluator:0'}
  assert set(task_lines(result.stdout, 'Final evaluation')) == {'worker:0'}
  assert 'evaluator:0' not in task_lines(result.stdout,
                                         'Exported a SavedModel to')
  assert len(list(model_dir.glob('export/final/*/saved_model.pb'))) == 1

  # Worker 1 restarted after the chief (worker 0) finished and left, then
  # the chief, whose results are written: neither changes a file, but for
  # worker 1's finished mark, which it writes as a trainer killed before
  # its own would (training_progress.TrainingProgress.mark_ended).
  files = _files(model_dir)
  command = [sys.executable, '-m', 'estimator_trainer.run', *flags]
  # As the workers' TF_CONFIG lists it: without the evaluator; and with a
  # worker 1, which decides from the chief's marks alone
  # (training_progress.TrainingProgress.ended), whether it trained or not.
  cluster = launched_cluster(result.stdout)
  del cluster['evaluator']
  cluster['worker'].append(f'127.0.0.1:{launcher.free_ports(1)[0]}')
  assert ('Training already finished at step 40: nothing left to do for '
          'worker:1') in restart_alone(command, cluster, 1)
  assert 'Training already finished at step 40 and ' in (
      restart_alone_in_process(command, cluster, 0, caplog))
  marked = _files(model_dir)
  assert marked.pop(f'{layout.FINISHED_DIR}/worker-1.json')
  assert marked == files
