"""docs/guide/export.md's tables of structured data's signatures against
real exports, as `saved_model_cli show` reads them, of every engine and
head (issue 47, item 4: the page gave the estimator engine's input as
`inputs` for every signature and the TF2 exports "the same outputs")."""

import glob
import pathlib
import re

import pytest
from tensorflow.python.tools import saved_model_utils

from estimator_trainer import engines
from estimator_trainer.config import TrainConfig
from estimator_trainer.tabular import dataset as tabular_dataset
import engine_params
import tabular_sets

pytestmark = pytest.mark.slow

PAGE = pathlib.Path(__file__).resolve().parents[1] / 'docs/guide/export.md'
HEADS = ('binary', 'multiclass', 'multilabel', 'regression')


def _table(marker):
  """The rows (lists of cells) of the table after `<!-- marker -->`."""
  text = PAGE.read_text().split(f'<!-- {marker} -->\n', 1)[1]
  lines = text.split('\n\n', 1)[0].splitlines()[2:]  # Past the header.
  return [[cell.strip() for cell in line.strip('|').split('|')]
          for line in lines]


def _names(cell):
  return re.findall(r'`([^`]+)`', cell)


def documented(engine, head, columns):
  """signature -> (inputs, outputs) that the page gives `engine` and
  `head`, `columns` the data's feature columns."""
  predictions = {row[0].strip('`'): set(_names(row[1]))
                 for row in _table('predictions')}
  signatures = {}
  for engines_cell, heads_cell, names, inputs, outputs in _table(
      'signatures'):
    if engine not in _names(engines_cell) or not (
        heads_cell == 'every head' or head in _names(heads_cell)):
      continue
    for name in _names(names):
      assert name not in signatures, f'{name} twice for {engine} {head}'
      signatures[name] = (
          columns if inputs == 'the columns' else set(_names(inputs)),
          predictions[head] if outputs == "the head's predictions"
          else set(_names(outputs)))
  return signatures


def exported(model_dir):
  """signature -> (inputs, outputs) of model_dir's final export."""
  path = sorted(glob.glob(f'{model_dir}/export/final/*'))[-1]
  meta = saved_model_utils.get_meta_graph_def(path, 'serve')
  return {name: (set(signature.inputs), set(signature.outputs))
          for name, signature in meta.signature_def.items()
          if name != '__saved_model_init_op'}


@pytest.fixture(scope='module')
def sets(tmp_path_factory):
  return tabular_sets.write(tmp_path_factory.mktemp('tabular'))


@pytest.mark.parametrize('engine', engine_params.engines_with(
    both_stacks=('ctl',)))
def test_the_pages_signatures_are_the_exports(sets, tmp_path, engine):
  for head in HEADS:
    data = sets[head]
    model_dir = tmp_path / head
    engines.ENGINES[engine].run(TrainConfig(
        model_dir=str(model_dir), engine=engine, model='linear',
        train_files=data.train_files, eval_files=data.eval_files,
        feature_spec=data.feature_spec, train_steps=1, export='final'))
    columns = {tabular_dataset.signature_key(name)
               for name in data.spec['columns']}
    assert exported(model_dir) == documented(engine, head, columns), head
