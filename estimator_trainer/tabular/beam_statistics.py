"""The tabular statistics as an Apache Beam pipeline, for training splits
beyond one machine: each training file is summarised on a worker (the same
streaming pass as in-process, statistics/scan.py) and the summaries merge in a
CombineFn (the transforms: beam_transforms.py); the result goes to
model_dir/preprocessing/ as the trainer writes it, so that `run
--model_dir=...` reads it instead of computing. Statistics the model_dir
holds already are kept, as the trainer keeps them (statistics.usable),
and the run says so in a line; stale ones are replaced.

    python -m estimator_trainer.tabular.beam_statistics \\
        --train_files='gs://bucket/train-*.csv' --feature_spec=spec.json \\
        --model_dir=gs://bucket/model [--eval_files=GLOB | --eval_fraction=F] \\
        [--head=HEAD] [--skip_rows_without_label] -- BEAM_OPTIONS

BEAM_OPTIONS pick the runner; the extra it needs and the exit codes:
beam_pipeline.py.
"""

import sys

from estimator_trainer import console

if __name__ == '__main__':
  # A command: TensorFlow's start-up noise hidden, before the imports below
  # load it (as infer's).
  console.quiet_tensorflow(verbose=False)
  console.require_extra('beam', 'apache_beam')

# pylint: disable=g-import-not-at-top
from estimator_trainer import errors
from estimator_trainer import layout
from estimator_trainer import sources
from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import beam_pipeline
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import statistics
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.statistics import beam_transforms
from estimator_trainer.tabular.statistics import split_summary
from estimator_trainer.tabular.statistics import training_files


def _parse(argv):
  parser = beam_pipeline.parser('estimator_trainer.tabular.beam_statistics',
                                __doc__)
  for name in ('train_files', 'feature_spec', 'model_dir'):
    parser.add_argument(f'--{name}', required=True)
  parser.add_argument('--eval_files')
  parser.add_argument('--eval_fraction', type=float)
  parser.add_argument('--head', choices=spec_lib.HEADS)
  parser.add_argument('--skip_rows_without_label', action='store_true')
  return parser.parse_known_args(argv)


def run(argv=None, pipeline_options=None):
  """Runs the pipeline of command line `argv`; the rest of it are Beam's
  pipeline options (or `pipeline_options`)."""
  args, beam_args = _parse(argv)
  if not args.eval_files and not args.eval_fraction:
    raise UsageError('--eval_files or --eval_fraction is required (the '
                     'training split is what the trainer trains on)')
  feature_spec = spec_lib.read(args.feature_spec)
  patterns = {sources.TRAIN: args.train_files,
              sources.TEST: args.eval_files}
  source = TabularSource(patterns, feature_spec, head=args.head,
                         eval_fraction=args.eval_fraction,
                         skip_unlabeled=args.skip_rows_without_label)
  source_args = (patterns, source.feature_spec, {
      'eval_fraction': args.eval_fraction,
      'skip_unlabeled': args.skip_rows_without_label})
  head = split_summary.head_of(source.feature_spec, args.head)
  files = training_files.of(source)
  path = layout.statistics_file(args.model_dir)
  if statistics.usable(args.model_dir, files):
    why = ('its checkpoints were trained on them' if layout.has_checkpoint(
        args.model_dir) else 'they are of these training files')
    print(f'{path}: kept, {why}; nothing computed (to compute them again, '
          'delete it or give another --model_dir)')
    return
  statistics.remove_stale(args.model_dir, files)
  beam_pipeline.run(
      pipeline_options or beam_pipeline.options(beam_args),
      lambda pipeline: beam_transforms.store(pipeline, args.model_dir,
                                             source_args, files, head))
  stored = statistics.read(path)
  print(f'{path}: the statistics of {stored.num_examples} training examples')


def main():
  with errors.reported():
    run(sys.argv[1:])


if __name__ == '__main__':
  main()
