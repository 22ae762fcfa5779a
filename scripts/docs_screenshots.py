#!/usr/bin/env python3
"""Screenshots of the built documentation site, as a user sees it: headless
Chromium (Debian's `chromium`) on the site served from localhost.

    bash scripts/docs.sh && python scripts/docs_screenshots.py

Writes docs/screenshots/{landing,guide-data,guide-export,search}.png: the
landing page, two guide pages and a search (mkdocs-material runs it from
`?q=` once its index has loaded). Driven through Chrome's DevTools protocol
(websocket-client), so each shot waits for what it shows to be on the page.
"""

import base64
import contextlib
import functools
import http.server
import io
import json
import pathlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

from absl import app
from absl import flags
from PIL import Image
import websocket

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLAGS = flags.FLAGS
flags.DEFINE_string('site_dir', str(ROOT / 'site'), 'The built site.')
flags.DEFINE_string('output_dir', str(ROOT / 'docs' / 'screenshots'),
                    'Where the PNGs go.')

# (file, path and query, a JS expression true once the page shows it).
SHOTS = (
    ('landing.png', '', "document.querySelector('.md-nav')"),
    ('guide-data.png', 'guide/data/#the-dataset_specjson-format',
     "document.querySelector('article')"),
    ('guide-export.png',
     'guide/export/#image-models-the-signatures-follow-the-data',
     "document.querySelector('article')"),
    ('search.png', '?q=dataset_spec.json',
     "document.querySelector('.md-search-result__list li')"),
)
_WIDTH, _HEIGHT = 1280, 900


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):

  def log_message(self, *args):  # The shots' paths are the output.
    del args


@contextlib.contextmanager
def _serve(directory):
  """The site over HTTP on a free loopback port; yields its URL."""
  handler = functools.partial(_QuietHandler, directory=directory)
  server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
  threading.Thread(target=server.serve_forever, daemon=True).start()
  try:
    yield f'http://127.0.0.1:{server.server_port}/'
  finally:
    server.shutdown()


@contextlib.contextmanager
def _browser():
  """A headless Chromium with a fresh profile; yields a call(method, ...)
  on its first page."""
  profile = tempfile.mkdtemp()
  port = _free_port()
  process = subprocess.Popen(
      ['chromium', '--headless', '--no-sandbox', '--disable-gpu',
       '--disable-background-networking', '--disable-component-update',
       '--disable-sync', '--no-first-run', f'--user-data-dir={profile}',
       '--hide-scrollbars', f'--window-size={_WIDTH},{_HEIGHT}',
       f'--remote-debugging-port={port}', 'about:blank'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.monotonic() + 30
    while True:
      try:
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list') as r:
          page = next(t for t in json.load(r) if t['type'] == 'page')
        break
      except (OSError, StopIteration):
        if time.monotonic() > deadline:
          raise
        time.sleep(0.2)
    connection = websocket.create_connection(page['webSocketDebuggerUrl'],
                                             timeout=60)
    ids = iter(range(1, 1 << 30))

    def call(method, **params):
      request = next(ids)
      connection.send(json.dumps({'id': request, 'method': method,
                                  'params': params}))
      while True:
        message = json.loads(connection.recv())
        if message.get('id') == request:
          return message.get('result', {})

    yield call
    connection.close()
  finally:
    process.terminate()
    process.wait()
    shutil.rmtree(profile, ignore_errors=True)


def _shoot(call, url, ready, path):
  """Opens `url`, waits (up to 60 s) for `ready`, writes a small PNG."""
  call('Page.navigate', url=url)
  condition = f'document.readyState === "complete" && !!({ready})'
  deadline = time.monotonic() + 60
  while not call('Runtime.evaluate', expression=condition,
                 returnByValue=True)['result'].get('value'):
    if time.monotonic() > deadline:
      raise TimeoutError(f'{url}: {ready} never became true')
    time.sleep(0.5)
  time.sleep(1)  # Fonts and the scroll to an anchor settle.
  png = base64.b64decode(call('Page.captureScreenshot', format='png')['data'])
  image = Image.open(io.BytesIO(png)).convert('RGB').quantize(colors=128)
  image.save(path, optimize=True)
  print(path)


def main(argv):
  del argv
  site = pathlib.Path(FLAGS.site_dir)
  if not (site / 'index.html').is_file():
    raise app.UsageError(f'{site} holds no built site: run scripts/docs.sh')
  output = pathlib.Path(FLAGS.output_dir)
  output.mkdir(parents=True, exist_ok=True)
  with _serve(str(site)) as base, _browser() as call:
    call('Emulation.setDeviceMetricsOverride', width=_WIDTH, height=_HEIGHT,
         deviceScaleFactor=1, mobile=False)
    for name, page, ready in SHOTS:
      _shoot(call, base + page, ready, output / name)


if __name__ == '__main__':
  app.run(main)
