#!/usr/bin/env python3
"""Writes the census-like set of issue 34's peer benchmark, deterministically.

    python scripts/make_census_like.py --output_dir=/tmp/census --rows=200000

<output_dir>/{train,test}-*.{tfrecord,csv}, feature_spec.json and
census.json: see `estimator_trainer.benchmark.census`. Prints the schema's
summary: rows, the positive fraction and the Bayes accuracy (the best any
model can score).
"""

from estimator_trainer import console

if __name__ == '__main__':
  # A command of the docs: TensorFlow's start-up noise hidden, before the
  # imports below load it.
  console.quiet_tensorflow(verbose=False)

# pylint: disable=g-import-not-at-top
from absl import app
from absl import flags

from estimator_trainer import errors
from estimator_trainer.benchmark import census

FLAGS = flags.FLAGS

flags.DEFINE_string('output_dir', None, 'Where the files go.')
flags.DEFINE_integer('rows', 200_000, 'Training rows (the test split has '
                     'rows // 10).')
flags.DEFINE_integer('num_shards', 4, 'Files per split and format.')
flags.DEFINE_integer('seed', 0, 'Seed of the model and the rows.')
flags.DEFINE_float('missing', 0.0, 'Fraction of every feature\'s cells left '
                   'empty (tests; the benchmark has none).')
flags.DEFINE_bool('weights', False, f'Add a weight column, '
                  f'{census.WEIGHT!r} (tests).')


def main(argv):
  if len(argv) > 1:
    errors.fail(2, f'unexpected arguments: {" ".join(argv[1:])}')
  if not FLAGS.output_dir:
    errors.fail(2, '--output_dir is required')
  if FLAGS.rows < FLAGS.num_shards * 10 or FLAGS.num_shards < 1:
    errors.fail(2, '--rows must be at least 10 x --num_shards >= 10')
  if not 0 <= FLAGS.missing < 1:
    errors.fail(2, '--missing must be in [0, 1)')
  schema = census.write(FLAGS.output_dir, FLAGS.rows, FLAGS.num_shards,
                        FLAGS.seed, FLAGS.missing, FLAGS.weights)
  print(f'{FLAGS.output_dir}: {schema["rows"]:,} train and '
        f'{schema["rows"] // 10:,} test rows, {FLAGS.num_shards} shards; '
        f'positive fraction {schema["positive_fraction"]:.3f}; Bayes accuracy '
        f'train {schema["train_bayes_accuracy"]:.4f}, test '
        f'{schema["test_bayes_accuracy"]:.4f}')


if __name__ == '__main__':
  app.run(main, flags_parser=errors.parse_flags)
