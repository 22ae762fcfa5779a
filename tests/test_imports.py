"""The package's import graph, read from the source (ast): no circle, no
import from a lower floor to a higher one (the architecture page's
floors), no module over 300 lines. `python tests/test_imports.py` prints
the facts."""

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = 'estimator_trainer'
MAX_LINES = 300

# The floors, lowest first, by top-level module or package ('' is the
# package root): a module imports only from its own floor or lower ones.
# A new top-level module takes its place here.
FLOORS = (
    ('foundations', {
        'errors', 'deprecation', 'stack', 'console', 'layout', 'outputs',
        'cadence', 'watchdog', 'progress', 'partitioning', 'gradients',
        'losses', 'layer_names', 'ema_recipe', 'flag_data', 'engines',
        'cluster', 'listen', 'weights', 'loss_scale', 'early_stopping',
        'best_weights',
        'faults', 'stop_signals', 'lease', 'lease_beater', 'run_lock'}),
    ('config', {'config', 'config_checks', 'config_data', 'config_optimizers',
                'config_resolved', 'config_flags', 'run_record',
                'model_recipe'}),
    ('models and heads', {'models', 'heads', 'metrics', 'summaries',
                          'hparams'}),
    ('sources and the shared pipeline', {'sources', 'examples', 'tabular',
                                         'pipeline'}),
    ('the data layer', {'data'}),
    ('training parts', {'batch_norm', 'optimizers', 'strategy',
                        'checkpoints', 'training_progress', 'run_log',
                        'export', 'export_policy'}),
    ('engines', {'estimator', 'tf2'}),
    ('commands', {'', 'run', 'migrate', 'benchmark', 'length_choice'}),
)


def modules(root=REPO):
  """Module name -> (path, is a package's __init__) of the package's files."""
  found = {}
  for path in sorted((root / PACKAGE).rglob('*.py')):
    parts = list(path.relative_to(root).with_suffix('').parts)
    is_package = parts[-1] == '__init__'
    found['.'.join(parts[:-1] if is_package else parts)] = (path, is_package)
  return found


def import_graph(root=REPO):
  """Module -> the package's modules it imports, anywhere in its body:
  `from pkg import name` is an edge to the submodule pkg.name if there is
  one, else to pkg."""
  found = modules(root)
  graph = {}
  for name, (path, is_package) in found.items():
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.Import):
        targets.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom):
        module = node.module or ''
        if node.level:  # Relative: from the importing module's package.
          package = name.split('.')[:len(name.split('.')) - node.level
                                    + is_package]
          module = '.'.join(package + ([module] if module else []))
        for alias in node.names:
          submodule = f'{module}.{alias.name}'
          targets.add(submodule if submodule in found else module)
    graph[name] = {t for t in targets if t in found and t != name}
  return graph


def circles(graph):
  """The strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in sorted(graph[node]):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while not component or component[-1] != node:
        component.append(stack.pop())
        on_stack.discard(component[-1])
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return found


def top_level(module):
  return module.split('.')[1] if '.' in module else ''


def floor(module):
  """The index in FLOORS of `module`'s floor (None: not placed)."""
  for number, (_, members) in enumerate(FLOORS):
    if top_level(module) in members:
      return number
  return None


def upward_imports(graph):
  """(importer, imported) pairs where the imported module's floor is
  higher than the importer's."""
  return sorted((source, target) for source, targets in graph.items()
                for target in targets if floor(target) > floor(source))


def long_modules(root=REPO):
  """(path, lines) of the package's modules and scripts over MAX_LINES."""
  paths = [path for path, _ in modules(root).values()]
  paths += sorted((root / 'scripts').glob('*.py'))
  counted = [(str(path.relative_to(root)), len(path.read_text().splitlines()))
             for path in paths]
  return sorted((item for item in counted if item[1] > MAX_LINES),
                key=lambda item: -item[1]), max(counted, key=lambda x: x[1])


def test_every_module_has_a_floor():
  assert [m for m in modules() if floor(m) is None] == []


def test_no_import_circle():
  assert circles(import_graph()) == []


def test_no_import_from_a_lower_floor_to_a_higher_one():
  assert upward_imports(import_graph()) == []


def test_no_module_over_300_lines():
  assert long_modules()[0] == []


def test_the_checker_sees_circles_and_upward_imports():
  graph = {f'{PACKAGE}.data': {f'{PACKAGE}.tabular.input'},
           f'{PACKAGE}.tabular.input': {f'{PACKAGE}.data'}}
  assert circles(graph) == [sorted(graph)]
  assert upward_imports(graph) == [(f'{PACKAGE}.tabular.input',
                                    f'{PACKAGE}.data')]


def test_the_checker_resolves_submodules_and_relative_imports(tmp_path):
  package = tmp_path / PACKAGE
  (package / 'sub').mkdir(parents=True)
  (package / '__init__.py').write_text('')
  (package / 'sub' / '__init__.py').write_text('from . import b\n')
  (package / 'sub' / 'b.py').write_text(
      'def f():\n  from estimator_trainer import sub\n'
      '  from ..sub.b import f\n')
  (package / 'a.py').write_text('from estimator_trainer.sub import b\n'
                                'import estimator_trainer.sub\n')
  graph = import_graph(tmp_path)
  assert graph[f'{PACKAGE}.a'] == {f'{PACKAGE}.sub.b', f'{PACKAGE}.sub'}
  assert graph[f'{PACKAGE}.sub'] == {f'{PACKAGE}.sub.b'}
  assert graph[f'{PACKAGE}.sub.b'] == {f'{PACKAGE}.sub'}
  assert circles(graph) == [[f'{PACKAGE}.sub', f'{PACKAGE}.sub.b']]


if __name__ == '__main__':
  edges = import_graph()
  over, largest = long_modules()
  print(f'modules: {len(edges)}, imports: {sum(map(len, edges.values()))}')
  print(f'circles: {len(circles(edges))} {circles(edges) or ""}')
  print(f'upward imports: {len(upward_imports(edges))} '
        f'{upward_imports(edges) or ""}')
  print(f'modules over {MAX_LINES} lines: {len(over)} {over or ""}')
  print(f'largest module: {largest[0]} ({largest[1]} lines)')
