"""MkDocs hook (mkdocs.yml `hooks:`): writes the reference pages that must
agree with the code at build time, from the code itself.

- reference/flags.md: every command's flags, from the XML the command's own
  `--helpxml` prints (absl's: the same definitions `--help` lists);
- reference/train-config.md: TrainConfig's fields, from the dataclass.

It also fails the build without a formatter of signatures (on_config).

Each runs in a subprocess on this checkout (PYTHONPATH), not on whatever
install of the package the building Python has.
"""

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The commands a user runs: (title, argv after the Python executable).
COMMANDS = (
    ('python -m estimator_trainer.run', ['-m', 'estimator_trainer.run']),
    ('python -m estimator_trainer.migrate',
     ['-m', 'estimator_trainer.migrate']),
    ('python -m estimator_trainer.tabular.infer',
     ['-m', 'estimator_trainer.tabular.infer']),
)

_FIELDS = r'''
import dataclasses, json, typing
from estimator_trainer import config, flag_data
hints = typing.get_type_hints(config.TrainConfig)
rows = []
for f in dataclasses.fields(config.TrainConfig):
  if f.default is not dataclasses.MISSING:
    default = repr(f.default)
  elif f.default_factory is not dataclasses.MISSING:
    default = repr(f.default_factory())
  else:
    default = None
  kind = hints[f.name]
  rows.append(dict(name=f.name, default=default,
                   type=getattr(kind, '__name__', None) or str(kind).replace('typing.', ''),
                   help=flag_data.help_text(f.name, f.metadata.get('help', '')),
                   choices=list(f.metadata.get('choices') or ()),
                   flag='help' in f.metadata))
print(json.dumps(rows))
'''


def _python(args, ok=(0,)):
  """stdout of this Python on `args`, the checkout's package first; exit
  codes other than `ok` fail the build."""
  env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
      filter(None, [ROOT, os.environ.get('PYTHONPATH')]))}
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300,
                          check=False)
  if result.returncode not in ok:
    raise RuntimeError(f'{" ".join(args)} exited {result.returncode}: '
                       f'{result.stderr[-2000:]}')
  return result.stdout


def _text(text):
  """One line of Markdown."""
  return ' '.join((text or '').split())


def command_flags(argv):
  """(usage, [(name, type, default, meaning)]) of the flags `--help` lists
  (absl's key flags), from the command's `--helpxml`."""
  # absl exits 1 after printing the XML, as after --help.
  root = ET.fromstring(_python([*argv, '--helpxml'], ok=(0, 1)))
  rows = [(flag.findtext('name'), flag.findtext('type'),
           flag.findtext('default'), flag.findtext('meaning'))
          for flag in root.iter('flag') if flag.findtext('key') == 'yes']
  return root.findtext('usage') or '', sorted(rows)


def flags_page():
  lines = [
      '# Command-line flags', '',
      'Generated when the site is built, from the `--helpxml` output of each '
      'command (the flag definitions `--help` prints), so this page and '
      '`--help` cannot disagree. Defaults are those of the stack the site '
      'was built on (TensorFlow 2.15: `--engine` defaults to `ctl` on the '
      'TensorFlow 2.21 stack). absl adds its own flags to every command '
      '(`--verbosity`, `--helpfull`, ...): `--helpfull` lists them.', '']
  for title, argv in COMMANDS:
    usage, rows = command_flags(argv)
    lines += [f'## `{title}`', '', '```text', usage.strip(), '```', '']
    for name, kind, default, meaning in rows:
      default = f', default `{_text(default)}`' if default else ''
      lines += [f'`--{name}` ({kind}{default})', f':   {_text(meaning)}', '']
  return '\n'.join(lines)


def config_page():
  rows = json.loads(_python(['-c', _FIELDS]))
  lines = [
      '# TrainConfig fields', '',
      'Generated when the site is built from the fields of '
      '[`TrainConfig`][estimator_trainer.config.TrainConfig]. A field with '
      'help text is also a [flag](flags.md) of the same name; its flag may '
      'show a different default where the field\'s `None` means "decided '
      'from the data or the stack".', '']
  for row in rows:
    choices = (f' One of: {", ".join(row["choices"])}.'
               if row['choices'] else '')
    default = 'required' if row['default'] is None else (
        f'default `{_text(row["default"])}`')
    flag = '' if row['flag'] else '; no flag'
    lines += [f'`{row["name"]}` (`{_text(row["type"])}`, {default}{flag})',
              f':   {_text(row["help"] + choices) or "(no help text)"}', '']
  return '\n'.join(lines)


def on_files(files, config):
  for path, content in (('reference/flags.md', flags_page()),
                        ('reference/train-config.md', config_page())):
    files.append(File.generated(config, path, content=content))
  return files


def on_config(config):
  """mkdocstrings-python wraps the API page's long signatures only through
  Ruff or Black; without either it says so in an INFO line, which --strict
  lets pass, and `make_input_fn(...)` runs past its box's edge."""
  if not any(importlib.util.find_spec(name) for name in ('ruff', 'black')):
    raise PluginError('the API reference needs ruff to format signatures '
                      '(the docs extra): bash scripts/docs.sh installs it')
  return config
