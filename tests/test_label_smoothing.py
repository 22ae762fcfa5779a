"""Label smoothing is the image recipe's (0.1), not structured data's (0, as
canned Estimators' heads), and a flag the run's head ignores
(--label_smoothing but with multiclass, --huber_delta but with regression) is
a usage error, never shown as applied."""

import dataclasses
import json
import types

import numpy as np
import pytest
import tensorflow as tf

from estimator_trainer import engines
from estimator_trainer import heads
from estimator_trainer import losses
from estimator_trainer import run_record
from estimator_trainer import hparams
from estimator_trainer.config import TrainConfig
from estimator_trainer.errors import UsageError
import engine_params
import tabular_sets
from test_tabular_runs import one_step

LABELS = np.array([0, 2, 1, 2])
LOGITS = np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [1.0, -1.0, 0.0],
                   [-2.0, 1.0, 3.0]], np.float32)


def _spec(head):
  """A data spec as heads.of_data reads it: images have no head."""
  return types.SimpleNamespace(name='d', head=head,
                               class_names=('a', 'b', 'c'),
                               model_input=(2, 2, 1))


@pytest.mark.parametrize('head, label_smoothing, applied', [
    (None, None, 0.1),  # The image recipe.
    (None, 0.0, 0.0),
    ('multiclass', None, 0.0),  # As canned Estimators' heads.
    ('multiclass', 0.2, 0.2),
])
def test_each_kind_of_data_smooths_by_its_default(head, label_smoothing,
                                                  applied):
  built = heads.of_data(_spec(head), label_smoothing=label_smoothing)
  assert built.label_smoothing == applied
  np.testing.assert_allclose(
      built.per_example_loss(LABELS, LOGITS),
      losses.per_example_loss(LABELS, LOGITS, applied), rtol=1e-6)
  if not applied:  # The plain cross-entropy, as evaluation reports it.
    np.testing.assert_allclose(built.per_example_loss(LABELS, LOGITS),
                               built.eval_loss(LABELS, LOGITS), rtol=1e-6)
  config = TrainConfig(model_dir='/tmp/x', label_smoothing=label_smoothing)
  assert hparams.run_hparams(config, _spec(head), 1, 64, 10)[
      'label_smoothing'] == applied


def test_the_default_is_none_and_shown_only_when_given():
  """None resolves per data kind; the Config line shows a given value."""
  assert TrainConfig(model_dir='/tmp/x').label_smoothing is None
  assert 'label_smoothing' not in TrainConfig(model_dir='/tmp/x').describe(
      'cnn', 'd', 1, 64)
  assert 'label_smoothing=0.2' in TrainConfig(
      model_dir='/tmp/x', label_smoothing=0.2).describe('cnn', 'd', 1, 64)


TABULAR = dict(feature_spec='s.json', train_files='t', eval_files='e',
               model='dnn')


@pytest.mark.parametrize('kwargs, message', [
    (dict(huber_delta=1.0),
     "^--huber_delta is for --head=regression; this run's head is "
     'multiclass$'),
    (dict(TABULAR, head='binary', label_smoothing=0.1),
     "^--label_smoothing is for --head=multiclass; this run's head is "
     'binary$'),
    (dict(TABULAR, head='regression', label_smoothing=0.0),
     "^--label_smoothing is for --head=multiclass; this run's head is "
     'regression$'),
    (dict(TABULAR, head='multilabel', huber_delta=2.0),
     "^--huber_delta is for --head=regression; this run's head is "
     'multilabel$'),
])
def test_a_flag_the_head_ignores_is_a_usage_error(kwargs, message):
  with pytest.raises(UsageError, match=message):
    TrainConfig(model_dir='/tmp/x', **kwargs)


@pytest.mark.estimator
def test_model_fn_params_refuse_a_flag_the_head_ignores():
  from estimator_trainer.estimator.params import ModelParams  # pylint: disable=g-import-not-at-top
  with pytest.raises(UsageError, match='--label_smoothing is for '
                     "--head=multiclass; this run's head is binary"):
    ModelParams(global_batch_size=8, head='binary', label_smoothing=0.1)
  assert ModelParams(global_batch_size=8).label_smoothing is None


def _record(tmp_path, head, label_smoothing):
  """values (every field's default, --mode=evaluate) of a model_dir whose
  record, of an earlier version, holds `label_smoothing` for `head`."""
  (tmp_path / 'model.json').write_text(json.dumps({
      'model': 'dnn', 'model_kwargs': None, 'head': head,
      'run': {'label_smoothing': label_smoothing, 'learning_rate': 0.01}}))
  return {**{field.name: field.default
             for field in dataclasses.fields(TrainConfig)},
          'model_dir': str(tmp_path), 'mode': 'evaluate'}


@pytest.mark.parametrize('head, taken', [('binary', False),
                                         ('multiclass', True)])
def test_a_record_of_the_old_default_gives_what_the_head_read(tmp_path, head,
                                                              taken):
  """Earlier versions recorded --label_smoothing=0.1 for every head: a later
  run takes it where its head applied it (multiclass), not where a usage
  error would follow."""
  values, got = run_record.read(_record(tmp_path, head, 0.1), set())
  assert got.get('learning_rate') == 0.01
  assert ('label_smoothing' in got) == taken
  assert values['label_smoothing'] == (0.1 if taken else None)


# --- Training through the engines -------------------------------------------

@pytest.fixture(scope='module')
def wine(tmp_path_factory):
  return tabular_sets.write(tmp_path_factory.mktemp('tabular'))['multiclass']


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.ENGINES)
def test_tabular_multiclass_trains_unsmoothed_by_default(wine, tmp_path,
                                                         engine):
  """One SGD step on wine (multiclass) without --label_smoothing is the
  step with --label_smoothing=0, in every engine."""
  default = one_step(tmp_path / 'default', wine, engine, 1)
  plain = one_step(tmp_path / 'plain', wine, engine, 1, label_smoothing=0.0)
  for name, change in plain.items():
    assert np.linalg.norm(change) > 0, name
    np.testing.assert_allclose(default[name], change, rtol=1e-6, atol=1e-9,
                               err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize('engine', engine_params.ENGINES)
def test_images_still_train_with_0_1_by_default(mnist_small_dir, tmp_path,
                                                engine):
  """Two steps of the default image run without the flag reach the weights
  of --label_smoothing=0.1 exactly (and not those of 0)."""
  def train(name, **flags):
    model_dir = tmp_path / name
    engines.ENGINES[engine].run(TrainConfig(
        model_dir=str(model_dir), engine=engine, mode='train',
        idx_dir=str(mnist_small_dir), train_steps=2, shuffle_buffer=0,
        export='none', **flags))
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(
        str(model_dir)))
    return {key: reader.get_tensor(key)
            for key in reader.get_variable_to_shape_map()}
  default = train('default')
  for key, value in train('given', label_smoothing=0.1).items():
    np.testing.assert_array_equal(default[key], value, err_msg=key)
  plain = train('plain', label_smoothing=0.0)
  assert any(not np.array_equal(default[key], plain[key]) for key in plain)
