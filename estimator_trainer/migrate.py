"""Command line: an Estimator model_dir carried over to the TF2 engines.

    python -m estimator_trainer.migrate --from=<estimator model_dir or
        checkpoint> --to=<new model_dir> [the run's model and data flags]

writes the TF2 engines' object-based checkpoint (`ckpt-<step>`, for `ctl`
and `keras` alike) of the Estimator's name-based one (tf2/migration.py):
every weight, the global step as the optimizer's `iterations`, and Adam's
moments. A variable it cannot place fails the run, naming it. The Estimator
model_dir is only read: it still resumes with `--engine=estimator`, and
`--to` must hold no checkpoint. Exit codes as for `estimator_trainer.run`.

A canned Estimator's model_dir (LinearClassifier, DNNClassifier,
DNNLinearCombinedClassifier, their regressors; tf2/canned.py):

    python -m estimator_trainer.migrate --from=<canned model_dir>
        --to=<new model_dir> --feature_spec=<spec of its feature columns>
        --train_files=... [--head=...] [--engine=estimator]

its model, hidden units and optimizers are read off its checkpoint;
`--engine=estimator` writes the package's estimator engine's checkpoint
instead of the TF2 engines'.
"""

import dataclasses
import os

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags
from absl import logging

from estimator_trainer import config_flags
from estimator_trainer import console
from estimator_trainer import errors
from estimator_trainer.errors import UsageError

config_flags.define_flags()
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string('from', None, 'The Estimator model_dir (its latest '
                    'checkpoint) or checkpoint to carry over.')
flags.DEFINE_string('to', None, 'The new model_dir of the TF2 engines.')

FLAGS = flags.FLAGS


def main(argv):
  with errors.reported():
    if len(argv) > 1:
      raise UsageError(f'unexpected arguments: {" ".join(argv[1:])}')
    if not FLAGS['from'].value or not FLAGS.to:
      raise UsageError('give --from (the Estimator model_dir or checkpoint) '
                       'and --to (the new model_dir)')
    if FLAGS['model_dir'].present or FLAGS['job_dir'].present:
      raise UsageError('--to is the new model_dir: give no --model_dir')
    FLAGS.model_dir = FLAGS.to
    source = FLAGS['from'].value
    # The run --from records (this package's model_dir: its model, data and
    # feature spec, stored with the statistics) where no flag is given, as
    # `run` resumes it; a canned Estimator's model_dir records none.
    config = dataclasses.replace(config_flags.config_from_flags(
        record_dir=source if os.path.isdir(source) else
        os.path.dirname(source)), engine='ctl', cluster=None)
    console.quiet_tensorflow(verbose=logging.get_verbosity() >= logging.DEBUG)
    # TensorFlow loads only now, after quiet_tensorflow (as in run.py).
    from estimator_trainer.tf2 import migration
    print(migration.convert(
        config, source, estimator_engine=FLAGS['engine'].present and
        FLAGS.engine == 'estimator',
        given={name for name in FLAGS if FLAGS[name].present}))


if __name__ == '__main__':
  app.run(main, flags_parser=errors.parse_flags)
