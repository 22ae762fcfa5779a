"""The documentation (README.md, docs/) against the code: its runnable
examples run, the flags its commands pass exist, its links resolve, and the
architecture page names every module. The site's strict build is CI's
(scripts/docs.sh, .ci/run)."""

import fnmatch
import functools
import importlib.util
import os
import pathlib
import re
import sys
import unicodedata

import pytest

from estimator_trainer import stack
import scripts_dir
import warm_process

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = REPO / 'docs'
README = REPO / 'README.md'
PAGES = sorted(DOCS.rglob('*.md'))
# A fenced block, with the HTML comment that may mark it just before it.
_BLOCK = re.compile(r'(?:<!-- ([\w -]+) -->\n)?```(\w*)[^\n]*\n(.*?)\n```',
                    re.S)
# The first line of a runnable block that is a file for the next to import.
_FILE = re.compile(r'# (\w+\.py)\b')


def _blocks(path):
  """(marker, language, code) of each fenced block of a Markdown file."""
  return [(marker or '', language, code)
          for marker, language, code in _BLOCK.findall(path.read_text())]


def _runnable_pages():
  return [page for page in PAGES
          if any(marker.startswith('runnable')
                 for marker, _, _ in _blocks(page))]


def _repo_env():
  """This checkout's package first."""
  path = os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')])
  return {**os.environ, 'PYTHONPATH': path}


@pytest.mark.slow
@pytest.mark.parametrize('page', _runnable_pages(),
                         ids=lambda page: str(page.relative_to(DOCS)))
def test_runnable_examples_run(page, tmp_path, fashion_mnist_dir):
  """The page's blocks marked runnable, in order, as one program in a fresh
  directory; their /tmp paths moved into it. The program is a module there,
  run warm (warm_process.py: `python -m example` from its first line, in
  the directory, which `python -m` puts first on sys.path for the blocks'
  files): nothing of a page runs before its first line, which imports
  what the server has imported. The commands a page runs are its own
  processes, as written."""
  del fashion_mnist_dir  # The examples read the set-up's Fashion-MNIST.
  script = []
  for marker, language, code in _blocks(page):
    if not marker.startswith('runnable'):
      continue
    assert language == 'python', f'{page}: a runnable {language} block'
    if 'estimator' in marker.split() and not stack.has_estimator():
      continue
    if 'beam' in marker.split() and not importlib.util.find_spec('tfx_bsl'):
      continue  # The [beam] extra: not in the TensorFlow 2.21 stack.
    code = code.replace("'/tmp/", f"'{tmp_path}/")
    name = _FILE.match(code)
    if name:
      (tmp_path / name.group(1)).write_text(code + '\n')
    else:
      script.append(code)
  if not script:
    pytest.skip(f'{page.name}: every runnable block needs tf.estimator')
  (tmp_path / 'example.py').write_text('\n\n'.join(script) + '\n')
  result = warm_process.run([sys.executable, '-m', 'example'], 900,
                            cwd=str(tmp_path))
  print(result.stdout)
  assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.slow
def test_the_sample_output_is_a_runs(estimator, fashion_mnist_dir, tmp_path):
  """The README's, getting started's and the command-line page's sample
  console output is what scripts/sample_output.py's run (README's
  `scripts/train.sh --train_epochs=1`) prints, with its timings and figures
  masked (issue 75, item 1: the pages showed a bare `loss` a label-smoothed
  run's training loss, and `step 3120/9370` of a 9,375-step run)."""
  del estimator, fashion_mnist_dir  # The run's engine and data.
  sample_output = scripts_dir.load('sample_output')
  model_dir = tmp_path / 'runs' / 'fashion_mnist'
  # A warm process (warm_process.py) in REPO, whose package it finds first:
  # the samples are the run's lines, none printed before its first line
  # (what a process prints before it: test_run.py's console tests).
  sampled = sample_output.samples(sample_output.console(
      model_dir, lambda command: warm_process.run(command, cwd=str(REPO))),
                                  model_dir)
  assert sample_output.differences(sampled) == [], (
      'run python scripts/sample_output.py')
  # The masks leave what the docs say of the run: how many steps, of what.
  masked, = sample_output.mask(sampled['sample progress line'])
  assert masked == ('step N/938 (N%) train loss (label-smoothed) X '
                    'N examples/s ETA T')


def test_structured_data_has_its_serving_and_cluster_examples():
  """Issue 75, item 6: export.md had no saved_model_cli example for
  structured data and clusters.md no cluster on CSV. The export's is a
  runnable block (test_runnable_examples_run runs it), the cluster's
  commands pass their flags to the trainer (the flags test checks them)."""
  served = [code for marker, _, code in _blocks(DOCS / 'guide' / 'export.md')
            if marker.startswith('runnable') and 'saved_model_cli' in code]
  assert any('--input_examples' in code and "'raw:predict'" in code
             for code in served), served
  trainers = [set(names) for code in _shell_and_yaml(
      DOCS / 'guide' / 'clusters.md') for command, names in _commands(code)
              if command == 'estimator_trainer.run']
  assert any({'train_files', 'eval_files', 'feature_spec'} <= names
             for names in trainers), trainers


def test_the_tabular_guides_census_paths_are_files_it_writes(tmp_path):
  """The tabular guide's commands read /tmp/census/ files its first one,
  scripts/make_census_like.py, writes (they read train-0.csv and
  test-0.csv, names it never wrote: its shards are train-00000-of-00004.csv
  and on), or one a command before writes (--output=)."""
  from estimator_trainer.benchmark import census  # pylint: disable=g-import-not-at-top
  census.write(str(tmp_path), rows=400)  # The guide's 4 shards, fewer rows.
  written = os.listdir(tmp_path)
  code = '\n'.join(_shell_and_yaml(DOCS / 'guide' / 'tabular.md'))
  named = set(re.findall(r"/tmp/census/([^\s'\\]+)", code))
  made = set(re.findall(r'--output=/tmp/census/(\S+)', code))
  assert named - made
  missing = [name for name in sorted(named - made)
             if not fnmatch.filter(written, name)]
  assert not missing, (missing, sorted(written))


def test_readme_python_is_a_checked_example():
  """The README's Python is a copy of a docs example the tests run."""
  checked = {code for page in PAGES
             for marker, _, code in _blocks(page)
             if marker.startswith('runnable') or marker == 'pipeline-example'}
  readme = [code for _, language, code in _blocks(README)
            if language == 'python']
  assert readme
  for code in readme:
    assert code in checked, f'README.md: not a runnable docs example:\n{code}'


# The commands the docs run, and how to ask each for its flags.
_ABSL_COMMANDS = {
    'estimator_trainer.run': ['-m', 'estimator_trainer.run'],
    'scripts/train.sh': ['-m', 'estimator_trainer.run'],
    'estimator_trainer.migrate': ['-m', 'estimator_trainer.migrate'],
    'estimator_trainer.tabular.infer': ['-m',
                                        'estimator_trainer.tabular.infer'],
}
# The scripts that import TensorFlow are asked as modules run in scripts/,
# which `python -m` puts first on sys.path as running the script does: warm
# (_help_flags), their flags the same. One that does not would list
# TensorFlow's flags too, warm: a script, cold (and cheap).
_WARM_SCRIPTS = ('write_tfrecords', 'make_census_like', 'tabular_baselines',
                 'l2_on_validation', 'length_by_folds')
for _script in _WARM_SCRIPTS:
  _ABSL_COMMANDS[f'scripts/{_script}.py'] = ['-m', _script]
for _script in ('benchmark', 'plot_curves'):
  _ABSL_COMMANDS[f'scripts/{_script}.py'] = [str(REPO / 'scripts' /
                                                  f'{_script}.py')]
# Commands of argparse, whose --help lists their flags.
_ARGPARSE_COMMANDS = {
    'scripts/local_cluster.py': [str(REPO / 'scripts' / 'local_cluster.py')],
    'scripts/chaos_cluster.py': [str(REPO / 'scripts' / 'chaos_cluster.py')],
    'estimator_trainer.benchmark.statistics_pass': [
        '-m', 'estimator_trainer.benchmark.statistics_pass'],
    'estimator_trainer.benchmark.scoring': [
        '-m', 'estimator_trainer.benchmark.scoring'],
    'estimator_trainer.tabular.beam_scoring': [
        '-m', 'estimator_trainer.tabular.beam_scoring'],
}
# Commands whose words after ` -- ` are Beam's pipeline options.
_BEAM_COMMANDS = ('estimator_trainer.tabular.beam_scoring',)
_COMMAND = re.compile('|'.join(re.escape(name) for name in
                               [*_ABSL_COMMANDS, *_ARGPARSE_COMMANDS]))
_FLAG = re.compile(r'(?<![\w-])--([a-z][a-z0-9_]*)')


def _defined_flags(command):
  """The flag names `command` defines (absl's --helpxml, argparse's --help)."""
  if command in _ARGPARSE_COMMANDS:
    return _help_flags(tuple(_ARGPARSE_COMMANDS[command]), '--help',
                       r'(?<![\w-])--([a-z][a-z0-9_]*)')
  return _help_flags(tuple(_ABSL_COMMANDS[command]), '--helpxml',
                     r'<name>([^<]+)</name>')


# By the program, not by the docs' name for it: scripts/train.sh is
# estimator_trainer.run, asked once. A module (`-m`) starts warm, forked
# with TensorFlow imported (in REPO, whose package it finds first, or in
# scripts/ for a script's); a script cold, as a real process. A data
# script as a real process: test_console.py's
# test_the_docs_data_scripts_print_no_tensorflow_startup_lines.
@functools.lru_cache(maxsize=None)
def _help_flags(argv, help_flag, pattern):
  result = warm_process.run(
      [sys.executable, *argv, help_flag], timeout=300,
      env=None if argv[0] == '-m' else _repo_env(),
      cwd=REPO / 'scripts' if argv[-1] in _WARM_SCRIPTS else REPO)
  names = set(re.findall(pattern, result.stdout))
  assert names, f'{argv}: no flags in its help: {result.stderr[-2000:]}'
  return frozenset(names)


def _commands(code):
  """(command, flag names) of each command line of a shell or YAML block:
  lines joined at backslashes; a local_cluster's flags after `--` are the
  trainer's, a Beam command's Beam's own."""
  code = re.sub(r'\\\n', ' ', code)
  for line in code.splitlines():
    line = line.split(' #')[0]
    found = _COMMAND.search(line)
    if not found:
      continue
    command, rest = found.group(0), line[found.end():]
    if command == 'scripts/local_cluster.py' and ' -- ' in f'{rest} ':
      rest, trainer = f'{rest} '.split(' -- ', 1)
      yield 'estimator_trainer.run', _FLAG.findall(trainer)
    if command in _BEAM_COMMANDS:
      rest = f'{rest} '.split(' -- ', 1)[0]
    yield command, _FLAG.findall(rest)


def _shell_and_yaml(path):
  for _, language, code in _blocks(path):
    if language in ('sh', 'bash', 'yaml'):
      if language == 'yaml':  # A container's command: one JSON-like list.
        code = ' '.join(code.split())
      yield code


# The flags are this package's definitions, alike on both stacks. The two
# tests share one worker (xdist_group), so that each command's help, a
# TensorFlow import for some, is asked once (_help_flags' cache).
@pytest.mark.default_stack_only
@pytest.mark.slow
@pytest.mark.xdist_group('docs_flags')
def test_flags_in_the_docs_commands_exist():
  """Every flag a command line in the docs passes is one that command
  defines (so `--help` lists it)."""
  unknown = []
  for path in [README, *PAGES]:
    for code in _shell_and_yaml(path):
      for command, names in _commands(code):
        missing = set(names) - _defined_flags(command)
        unknown += [f'{path.relative_to(REPO)}: {command} --{name}'
                    for name in sorted(missing)]
  assert not unknown, '\n'.join(unknown)


# Inline code that runs another program, whose flags are its own.
_OTHER_PROGRAMS = ('py-spy', 'tensorboard', 'pip', 'saved_model_cli', 'uv',
                   'ruff')


@pytest.mark.default_stack_only
@pytest.mark.slow
@pytest.mark.xdist_group('docs_flags')
def test_flags_named_in_the_text_exist():
  """Every `--flag` the text names (outside code blocks) is a flag of one
  of the package's commands or scripts."""
  known = frozenset().union(*(_defined_flags(command) for command in
                              [*_ABSL_COMMANDS, *_ARGPARSE_COMMANDS]))
  unknown = []
  for path in [README, *PAGES]:
    text = re.sub(r'```.*?```', '', path.read_text(), flags=re.S)
    for code in re.findall(r'`([^`]+)`', text):
      if code.split()[0] in _OTHER_PROGRAMS:
        continue
      unknown += [f'{path.relative_to(REPO)}: --{name}'
                  for name in _FLAG.findall(code) if name not in known]
  assert not unknown, '\n'.join(unknown)


def _slug(heading):
  """Python-Markdown's toc anchor of a heading (its default slugify)."""
  text = re.sub(r'[`*]', '', heading)
  text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore')
  text = re.sub(r'[^\w\s-]', '', text.decode('ascii')).strip().lower()
  return re.sub(r'[-\s]+', '-', text)


def test_readme_links_resolve():
  """The README's relative links name files that exist, and headings in
  them (the site's strict build checks the docs' own links)."""
  broken = []
  for target in re.findall(r'\]\(([^)]+)\)', README.read_text()):
    if re.match(r'\w+://', target):
      continue
    path, _, anchor = target.partition('#')
    if not (REPO / path).is_file():
      broken.append(target)
    elif anchor:
      text = (REPO / path).read_text()
      headings = re.findall(r'^#+ (.*)$', text, re.M)
      if anchor not in {_slug(heading) for heading in headings}:
        broken.append(target)
  assert not broken, broken


def test_architecture_page_names_every_module():
  page = (DOCS / 'contributing' / 'architecture.md').read_text()
  package = REPO / 'estimator_trainer'
  missing = [str(path.relative_to(package))
             for path in sorted(package.rglob('*.py'))
             if path.name != '__init__.py' and
             not re.search(rf'(?<![\w.]){re.escape(path.name)}', page)]
  assert not missing, ('docs/contributing/architecture.md: add '
                       f'{", ".join(missing)} to the module list')


def test_api_reference_documents_what_the_package_exports():
  import estimator_trainer  # pylint: disable=g-import-not-at-top
  page = (DOCS / 'reference' / 'api.md').read_text()
  documented = set(re.findall(r'^::: [\w.]+\.(\w+)$', page, re.M))
  assert documented == set(estimator_trainer.__all__)


def test_only_dated_measurements_quote_the_suites_count():
  """A pass count quoted as the suite's goes stale with the next test (the
  README said 307 long after; issue 47, item 5): the performance page's
  dated record alone gives one."""
  for path in [README, *PAGES]:
    if path.name == 'performance.md':
      continue
    quoted = re.findall(r'\d+\s+passed', path.read_text())
    assert not quoted, f'{path.relative_to(REPO)}: {quoted}'


# The width of a code block on the site (Material's content column): a
# longer line is cut off at the box edge, to be scrolled to (issue 47).
_CODE_WIDTH = 80


def test_commands_and_python_fit_the_sites_code_blocks():
  for page in PAGES:
    for _, language, code in _blocks(page):
      if language not in ('sh', 'python'):
        continue
      for line in code.splitlines():
        assert len(line) <= _CODE_WIDTH, (
            f'{page.relative_to(REPO)}: {len(line)} characters: {line}')


def test_the_site_build_fails_without_a_signature_formatter(monkeypatch):
  """It passed with an INFO line ("Formatting signatures requires either
  Black or Ruff"), and the API page's signatures ran past their boxes."""
  # The docs extra is the default stack's (the TF 2.21 stack has no mkdocs).
  pytest.importorskip('mkdocs')
  hooks = scripts_dir.load('mkdocs_hooks')
  from mkdocs.exceptions import PluginError  # pylint: disable=g-import-not-at-top
  find_spec = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *args: (
      None if name in ('ruff', 'black') else find_spec(name, *args)))
  with pytest.raises(PluginError, match='needs ruff'):
    hooks.on_config({})
