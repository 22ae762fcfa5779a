"""Image data sources, a module each: TFDS (tfds.py), the original IDX
files (idx.py) and TFRecords of tf.Example (tfrecord.py), each with its
DatasetSpec (spec.py); `make_source` picks the one a config asks for.

Every source yields `(uint8 image [H, W, C], int64 label)` elements of its
spec's shape, sharded by pipeline on request, so everything after the source
(`data.make_input_fn`: preprocessing, batching) is shared.
"""

import logging

# The names the package and pipelines use, from the module of each.
from estimator_trainer.sources.files import (  # pylint: disable=unused-import
    compression, eagerly, glob_files, whole_files)
from estimator_trainer.sources.idx import (  # pylint: disable=unused-import
    DEBIAN_IDX_DIRS, IDX_FILES, IdxSource, resolve_idx_dir)
from estimator_trainer.sources.spec import (  # pylint: disable=unused-import
    KNOWN_CLASS_NAMES, SPEC_FILE, TEST, TRAIN, DatasetSpec)
from estimator_trainer.sources.tfds import TfdsSource
from estimator_trainer.sources.tfrecord import (
    TFRecordSource, example_format, tfrecord_spec)

_logger = logging.getLogger(__name__)


def make_source(config):
  """The source `config` asks for; IDX files when available under `auto`."""
  idx_dir = resolve_idx_dir(config)
  if config.train_files:
    patterns = {TRAIN: config.train_files, TEST: config.eval_files}
    spec = tfrecord_spec(config, glob_files(patterns[TRAIN]))
    source = TFRecordSource(patterns, example_format(config, spec), spec)
  elif idx_dir and config.data_source != 'tfds':
    source = IdxSource(config.dataset, idx_dir)
  else:
    source = TfdsSource(config.dataset, config.data_dir,
                        {TRAIN: config.train_split, TEST: config.eval_split},
                        config.image_size)
  _logger.info('Data: %s (%s)', source, source.spec)
  return source
