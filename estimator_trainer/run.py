"""Command line: `python -m estimator_trainer.run --model_dir DIR [flags]`.

Trains a Keras model on images (Fashion-MNIST by default, a TFDS dataset,
TFRecords: --model=cnn, resnet20 or MODULE:FUNCTION) or on structured data
(CSV files or TFRecords of tf.Example: --model=linear, dnn, wide_deep or
MODULE:FUNCTION) with tf.estimator, a TF2 custom loop or Model.fit
(--engine), and writes checkpoints, TensorBoard events and `metrics.json`
to `--model_dir`. Each flag's help starts with the data it applies to:
[images], [structured data] or [images, structured data].
Exit codes: 0 success, 1 runtime error, 2 usage error.
"""

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags
from absl import logging

from estimator_trainer import config_flags
from estimator_trainer import console
from estimator_trainer import engines
from estimator_trainer import listen
from estimator_trainer import errors
from estimator_trainer.errors import UsageError

config_flags.define_flags()
# --help lists them as this module's own.
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_bool(
    'listen_all_interfaces', False,
    'In a TF_CONFIG cluster, let this task\'s gRPC server listen on every '
    'interface, as TensorFlow does, instead of only on its TF_CONFIG address '
    '(needed when that address is not the machine\'s own, e.g. a NAT).')

FLAGS = flags.FLAGS


def main(argv):
  with errors.reported():
    if len(argv) > 1:
      raise UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
    config = config_flags.config_from_flags()
    if not FLAGS.listen_all_interfaces:
      listen.confine(config.cluster)
    console.quiet_tensorflow(verbose=logging.get_verbosity() >= logging.DEBUG)
    engines.ENGINES[config.engine].run(config)


def run():
  app.run(main, flags_parser=errors.parse_flags)


if __name__ == '__main__':
  run()
