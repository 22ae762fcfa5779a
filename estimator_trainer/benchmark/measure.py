"""Examples/s over intervals of steps, and the model's FLOP per example."""

import os
import statistics
import time

from estimator_trainer import layout

# Training costs about 3 forward passes (forward, gradients of activations
# and of weights); a multiply-add is 2 FLOP.
TRAIN_FLOP_PER_MAC = 2 * 3


def steady_rate(rates):
  """Median of interval rates, leaving out the first (warm-up) interval."""
  if len(rates) < 2:
    raise RuntimeError(f'{len(rates)} timed interval(s): too few, raise '
                       '--steps or lower --summary_steps')
  return statistics.median(rates[1:])


class IntervalTimer:
  """Examples/s over every `every_steps` steps after the first step.

  The first step is left out as the engines' summaries leave it out: it
  traces and optimizes the graph.
  """

  def __init__(self, batch_size, every_steps):
    self._batch_size = batch_size
    self._every_steps = every_steps
    self._last = None
    self._steps = 0
    self.rates = []

  def step(self):
    now = time.perf_counter()
    if self._last is None:
      self._last = now
      return
    self._steps += 1
    if self._steps == self._every_steps:
      self.rates.append(self._steps * self._batch_size / (now - self._last))
      self._last, self._steps = now, 0


def machine():
  """What the figures were measured on: CPUs, model and vector extensions
  (Linux's /proc/cpuinfo), e.g. '2 CPUs, AMD EPYC, AVX2 AVX-512 (bf16)'."""
  try:
    with open('/proc/cpuinfo') as f:
      info = f.read()
  except OSError:
    return f'{os.cpu_count()} CPUs'
  model = next((line.split(':', 1)[1].strip() for line in info.splitlines()
                if line.startswith('model name')), '?')
  flags = set(next((line.split(':', 1)[1].split() for line in
                    info.splitlines() if line.startswith('flags')), []))
  vector = [name for flag, name in (('avx2', 'AVX2'), ('avx512f', 'AVX-512'),
                                    ('avx512_bf16', '(bf16)'),
                                    ('amx_tile', 'AMX'))
            if flag in flags]
  return ', '.join([f'{os.cpu_count()} CPUs', model, ' '.join(vector)])


def read_event_rates(model_dir, tag='examples_per_second'):
  """The values of scalar `tag` in model_dir's event files, by step (read
  without TensorFlow: see `runs.wait_with_rusage`)."""
  return [value for _, value in layout.read_scalars(model_dir).get(tag, [])]


def forward_macs(model):
  """Multiply-adds of one example's forward pass through `model`.

  Conv2D: output elements x kernel height x kernel width x input channels;
  Dense: inputs x units. Biases, ReLU and pooling are a few adds or
  comparisons per element and are not counted. For the CNN on
  28x28x1 images (valid padding, 2x2 pooling):

    conv1   26*26*32 outputs x 3*3*1        =   194,688
    conv2   11*11*64 outputs x 3*3*32       = 2,230,272
    hidden  (5*5*64 = 1600 inputs) x 64     =   102,400
    logits  64 x 10                         =       640
    total                                   = 2,528,000

  so training costs ~2.528e6 x 2 x 3 = 15.17 MFLOP per example.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  macs = 0
  for layer in model.layers:
    if isinstance(layer, tf.keras.layers.Conv2D):
      kernel_h, kernel_w, in_channels, _ = layer.kernel.shape
      outputs = 1
      for dim in layer.output.shape[1:]:
        outputs *= dim
      macs += outputs * kernel_h * kernel_w * in_channels // layer.groups
    elif isinstance(layer, tf.keras.layers.Dense):
      macs += layer.kernel.shape[0] * layer.kernel.shape[1]
  return macs


def train_flop_per_example(model='cnn', input_shape=(28, 28, 1),
                           num_classes=10):
  """Training FLOP per example of --model `model` at `input_shape`."""
  from estimator_trainer import models  # pylint: disable=g-import-not-at-top
  return forward_macs(models.build(model, input_shape, num_classes)
                      ) * TRAIN_FLOP_PER_MAC
