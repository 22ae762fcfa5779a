"""Batch scoring on Apache Beam: files of any size (CSV or TFRecords of
tf.Example, as training reads them) scored by a model_dir's exported
SavedModel through RunInference (tfx-bsl's SavedModel handler: its
`predict` signature, one model per worker process), written as sharded
JSON lines, each the row's place (file, and line or record), its key
column's value if one is given, and its predictions, as `--mode=predict`
writes them (the transforms: scoring_transforms.py).

    python -m estimator_trainer.tabular.beam_scoring \\
        --model_dir=gs://bucket/model --input='gs://bucket/new-*.csv' \\
        --output=gs://bucket/scores/part [--saved_model=EXPORT] \\
        [--key_column=NAME] [--num_shards=N] [--unreadable_as_missing] \\
        -- BEAM_OPTIONS

A CSV row becomes a tf.Example by the model_dir's stored feature spec
(its features alone: the label may be absent). BEAM_OPTIONS pick the
runner; the extra it needs and the exit codes: beam_pipeline.py.
"""

import os
import sys

from estimator_trainer import console

if __name__ == '__main__':
  # A command: TensorFlow's start-up noise hidden, before the imports below
  # load it (as infer's).
  console.quiet_tensorflow(verbose=False)
  console.require_extra('beam', 'apache_beam', 'tfx_bsl')

# pylint: disable=g-import-not-at-top
import tensorflow as tf
from tensorflow.python.tools import saved_model_utils  # pylint: disable=g-direct-tensorflow-import

from estimator_trainer import errors
from estimator_trainer import layout
from estimator_trainer import sources
from estimator_trainer.errors import UsageError
from estimator_trainer.tabular import beam_pipeline
from estimator_trainer.tabular import scoring_transforms
from estimator_trainer.tabular import spec as spec_lib


def _parse(argv):
  parser = beam_pipeline.parser('estimator_trainer.tabular.beam_scoring',
                                __doc__)
  parser.add_argument('--model_dir', required=True,
                      help='A trained model_dir of structured data: its '
                      'stored feature spec, its newest export.')
  parser.add_argument('--input', required=True,
                      help='Comma-separated globs of the files to score.')
  parser.add_argument('--output', required=True,
                      help='The JSON lines files\' prefix: '
                      'OUTPUT-SSSSS-of-NNNNN.jsonl.')
  parser.add_argument('--saved_model',
                      help="An export to score with (default: the model_dir's"
                      ' newest, of export/*/<timestamp>).')
  parser.add_argument('--key_column',
                      help="A column whose value each line carries too "
                      "(default: the model_dir's run's; empty: none).")
  parser.add_argument('--num_shards', type=int, default=0,
                      help='Output files (0: the runner decides).')
  parser.add_argument('--unreadable_as_missing', action='store_true',
                      default=None, help="A CSV number cell that is no "
                      "number is missing (default: the model_dir's run's).")
  return parser.parse_known_args(argv)


def newest_export(model_dir):
  """The newest SavedModel of model_dir's exporters (final, best, latest,
  manual), by its timestamp."""
  exports = tf.io.gfile.glob(os.path.join(layout.export_dir(model_dir, '*'),
                                          '*'))
  exports = [path for path in exports
             if os.path.basename(path.rstrip('/')).isdigit()]
  if not exports:
    raise UsageError(f'{model_dir} holds no export (export/*/<timestamp>): '
                     'train with --export=final, run --mode=export on it, or '
                     'give --saved_model')
  return max(exports, key=lambda path: int(os.path.basename(path)))


def _recorded(model_dir, name):
  """The model_dir's run's setting `name` (model.json), None without."""
  record = layout.read_model_file(model_dir) or {}
  return (record.get('run') or {}).get(name)


def _check_key(key_column, saved_model):
  """UsageError if `key_column` is a name a line has already."""
  signature = saved_model_utils.get_meta_graph_def(
      saved_model, tf.saved_model.SERVING).signature_def['predict']
  if key_column in (*scoring_transforms.PLACE,
                    *signature.outputs):
    raise UsageError(f'--key_column={key_column}: each line has a field of '
                     'that name already (the row\'s place: '
                     f'{", ".join(scoring_transforms.PLACE)}; the predictions: '
                     f'{", ".join(sorted(signature.outputs))})')


def run(argv=None, pipeline_options=None):
  """Runs the pipeline of command line `argv`; the rest of it are Beam's
  pipeline options (or `pipeline_options`). Returns the saved model
  used."""
  args, beam_args = _parse(argv)
  stored = layout.stored_feature_spec(args.model_dir)
  if stored is None:
    raise UsageError(f'{args.model_dir} holds no feature spec '
                     f'({layout.feature_spec_file(args.model_dir)}): not a '
                     'model_dir of structured data that trained')
  feature_spec = spec_lib.read(stored)
  saved_model = args.saved_model or newest_export(args.model_dir)
  unreadable_as_missing = args.unreadable_as_missing
  if unreadable_as_missing is None:
    unreadable_as_missing = bool(_recorded(args.model_dir,
                                           'unreadable_as_missing'))
  key_column = args.key_column
  if key_column is None:
    key_column = _recorded(args.model_dir, 'key_column')
  try:
    scoring_transforms.model_handler(saved_model)
  except (ValueError, OSError, tf.errors.OpError) as e:
    raise UsageError(f"--saved_model={saved_model}: no 'predict' signature "
                     'of serialized tf.Examples to score with '
                     f'({errors.first_line(e)})') from None
  if key_column:
    _check_key(key_column, saved_model)
  files = sources.glob_files(args.input)
  print(f'Scoring {len(files)} files with {saved_model}')
  beam_pipeline.run(
      pipeline_options or beam_pipeline.options(beam_args),
      lambda pipeline: scoring_transforms.score(
          pipeline, files, feature_spec, saved_model, args.output,
          args.num_shards, key_column or None, unreadable_as_missing))
  print(f'Wrote the predictions to {args.output}-*.jsonl')
  return saved_model


def main():
  with errors.reported():
    run(sys.argv[1:])


if __name__ == '__main__':
  main()
