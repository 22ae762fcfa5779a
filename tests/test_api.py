"""The package's public API is pinned (a change is a decision, written in
docs/CHANGELOG.md), and names it removed or renamed keep working for a release
with a DeprecationWarning naming their replacement (issue 33, item 13).

`python tests/test_api.py` rewrites the pinned API (tests/public_api.json)
from the package as it is."""

import dataclasses
import inspect
import json
import pathlib
import re
import subprocess
import sys
import textwrap
import types

import pytest

import estimator_trainer
from estimator_trainer import stack
from estimator_trainer.config import TrainConfig
from estimator_trainer.data import ModeKeys
from estimator_trainer.errors import UsageError

REPO = pathlib.Path(__file__).resolve().parents[1]
PINNED = REPO / 'tests' / 'public_api.json'
CHANGELOG = REPO / 'docs' / 'CHANGELOG.md'
# The names that load the estimator engine: none on TensorFlow 2.16+.
_ESTIMATOR_NAMES = {name for name, module in estimator_trainer._API.items()  # pylint: disable=protected-access
                    if module == 'estimator_trainer.estimator'}


# TrainConfig's engine defaults to the stack's (estimator on TensorFlow 2.15,
# ctl where tf.estimator is gone): pinned as that rule, not as either value.
_ENGINE_DEFAULT = (f'engine: str = {stack.default_engine()!r}',
                   'engine: str = <stack.default_engine()>')


def _signature(obj):
  """inspect.signature as text, without the addresses of default objects."""
  return re.sub(r' at 0x[0-9a-f]+', '', str(inspect.signature(obj))).replace(
      *_ENGINE_DEFAULT)


def api_of(name):
  """What a caller of `name` relies on: its signature; for a class, also
  its fields (with their defaults) and its public methods' signatures."""
  obj = getattr(estimator_trainer, name)
  api = {'signature': _signature(obj)}
  if inspect.isclass(obj):
    if dataclasses.is_dataclass(obj):
      api['fields'] = {field.name: _field(field)
                       for field in dataclasses.fields(obj)}
    api['methods'] = {
        attr: ('property' if isinstance(value, property) else
               _signature(getattr(obj, attr)))
        for attr, value in sorted(vars(obj).items())
        if not attr.startswith('_') and (callable(value) or isinstance(
            value, (property, classmethod, staticmethod)))}
  return api


def _field(field):
  """A dataclass field as its signature shows it: `name: type[ = default]`."""
  text = f'{field.name}: {inspect.formatannotation(field.type)}'
  if field.default is not dataclasses.MISSING:
    text += f' = {field.default!r}'
  elif field.default_factory is not dataclasses.MISSING:
    text += f' = {field.default_factory.__qualname__}()'
  return text.replace(*_ENGINE_DEFAULT)


def _pinned():
  return json.loads(PINNED.read_text())


_HOW_TO_CHANGE = (
    'The public API changed. If that is meant, it is a decision: write it in '
    'docs/CHANGELOG.md (and bump estimator_trainer.__version__ by semantic '
    'versioning; a removed or renamed name keeps working for a release as a '
    'deprecated alias), then update the expectation: python tests/test_api.py')


def test_the_exported_names_are_the_pinned_ones():
  assert sorted(estimator_trainer.__all__) == sorted(_pinned()), (
      _HOW_TO_CHANGE)


@pytest.mark.parametrize('name', [
    pytest.param(name, marks=[pytest.mark.estimator] if name in
                 _ESTIMATOR_NAMES else [])
    for name in sorted(estimator_trainer.__all__)])
def test_each_exported_name_keeps_its_pinned_signature(name):
  assert api_of(name) == _pinned().get(name), _HOW_TO_CHANGE


def test_the_changelog_describes_this_version():
  released = re.findall(r'^## \[(\d+\.\d+\.\d+)\]', CHANGELOG.read_text(),
                        re.MULTILINE)
  assert released and released[0] == estimator_trainer.__version__, (
      f'docs/CHANGELOG.md: the newest release is {released[:1]}, the '
      f'package is {estimator_trainer.__version__}')


# --- Deprecated names -------------------------------------------------------


@pytest.mark.estimator
def test_train_config_model_params_is_a_deprecated_alias():
  config = TrainConfig(model_dir='/tmp/x', learning_rate=0.01,
                       optimizer='sgd')
  with pytest.warns(DeprecationWarning,
                    match=r'estimator_trainer\.model_params\(config, ') as w:
    params = config.model_params(128, 500)
  # Reported where the caller called it, not inside the package.
  assert w[0].filename == __file__
  assert params == estimator_trainer.model_params(config, 128, 500)
  assert params['learning_rate'] == 0.01 and params['decay_steps'] == 500


@pytest.mark.estimator
def test_config_model_params_class_is_a_deprecated_alias():
  from estimator_trainer import config  # pylint: disable=g-import-not-at-top
  from estimator_trainer.estimator import params  # pylint: disable=g-import-not-at-top
  with pytest.warns(DeprecationWarning,
                    match=r'estimator_trainer\.estimator\.params\.ModelParams'):
    assert config.ModelParams is params.ModelParams
  with pytest.raises(AttributeError, match='no attribute'):
    config.NoSuchName  # pylint: disable=pointless-statement


@pytest.mark.estimator
def test_params_key_dataset_is_deprecated_for_class_names():
  from estimator_trainer.estimator.params import ModelParams  # pylint: disable=g-import-not-at-top
  from estimator_trainer.sources import KNOWN_CLASS_NAMES  # pylint: disable=g-import-not-at-top
  with pytest.warns(DeprecationWarning, match="'class_names'"):
    params = ModelParams.from_dict({'global_batch_size': 8,
                                    'dataset': 'mnist'})
  assert params.class_names == KNOWN_CLASS_NAMES['mnist']
  with pytest.warns(DeprecationWarning), pytest.raises(
      ValueError, match="dataset 'cifar10' is none of fashion_mnist, mnist"):
    ModelParams.from_dict({'global_batch_size': 8, 'dataset': 'cifar10'})


def test_config_imports_without_the_estimator_engine():
  """config.py (TrainConfig and its deprecated alias) loads on a stack
  without tf.estimator: the alias imports the engine only when called."""
  result = subprocess.run(
      [sys.executable, '-c', textwrap.dedent('''
          import sys
          from estimator_trainer.config import TrainConfig
          TrainConfig(model_dir='/tmp/x')
          print(sorted(m for m in sys.modules
                       if m.startswith(('estimator_trainer.estimator',
                                        'tensorflow_estimator'))))
          ''')], capture_output=True, text=True, check=True)
  assert result.stdout.strip() == '[]'


if __name__ == '__main__':
  PINNED.write_text(json.dumps(
      {name: api_of(name) for name in sorted(estimator_trainer.__all__)},
      indent=1, sort_keys=True) + '\n')
  print(f'wrote {PINNED}')


def test_make_input_fn_train_window_is_deprecated(mnist_small_dir):
  config = TrainConfig(model_dir='/tmp/x', dataset='mnist',
                       idx_dir=str(mnist_small_dir), shuffle_buffer=0)
  with pytest.warns(DeprecationWarning,
                    match=r'make_input_fn without it') as w:
    input_fn = estimator_trainer.make_input_fn(config, 8, train_window=3)
  assert w[0].filename == __file__
  features, labels = next(iter(input_fn(ModeKeys.TRAIN)))
  assert features['image'].shape == [3, 8, 28, 28, 1]  # Windows, as 0.2.0.
  assert labels.shape == [3, 8]


@pytest.mark.both_stacks
def test_train_and_evaluate_runs_the_configs_engine(tmp_path):
  """The package root's train_and_evaluate trains in TrainConfig.engine
  (issue 76, item 1: engine='ctl' had trained with Estimator on TF 2.15,
  and on 2.21 the README's whole job raised EstimatorMissing)."""
  data = tmp_path / 'data.csv'
  rows = [f'{i % 7},{(i * 3) % 5},{int(i % 7 > 3)}' for i in range(64)]
  data.write_text('a,b,y\n' + '\n'.join(rows) + '\n')
  metrics = estimator_trainer.train_and_evaluate(TrainConfig(
      model_dir=str(tmp_path / 'model'), engine='ctl', train_files=str(data),
      label_key='y', train_steps=3, export='none', mode='train'))
  assert metrics['global_step'] == 3
  written = sorted(path.name for path in (tmp_path / 'model').iterdir())
  assert 'ckpt-3.index' in written, written  # The TF2 engines' checkpoint.
  assert not [name for name in written if name.startswith('model.ckpt')]


@pytest.mark.estimator
@pytest.mark.parametrize('name', ['make_run_config', 'trainer_fn'])
def test_estimators_own_entry_points_refuse_another_engine(name, tmp_path):
  """Entry points that can only run Estimator refuse, in one line, a
  TrainConfig of another engine (they had run Estimator whatever it said;
  issue 76, item 1)."""
  config = TrainConfig(model_dir=str(tmp_path), engine='ctl')
  call = {'make_run_config': lambda: estimator_trainer.make_run_config(config),
          'trainer_fn': lambda: estimator_trainer.trainer_fn(
              types.SimpleNamespace(
                  serving_model_dir=str(tmp_path), train_files=['t'],
                  eval_files=['e'], train_steps=1,
                  custom_config={'engine': 'ctl'}))}[name]
  with pytest.raises(UsageError, match=(
      rf"^{name}.* is the estimator engine's \(tf.estimator\): a TrainConfig "
      r"of engine='ctl' runs with estimator_trainer.train_and_evaluate")):
    call()
