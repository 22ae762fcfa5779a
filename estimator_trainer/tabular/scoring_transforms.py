"""The Beam pipeline of batch scoring (tabular/beam_scoring.py is its
command line): each input file read on a worker into keyed serialized
tf.Examples (a CSV row parsed as training parses it, by the model_dir's
feature spec), scored by tfx-bsl's in-process SavedModel handler through
Beam's RunInference (its keys carried by KeyedModelHandler, one model per
worker process), written as sharded JSON lines. In a module of its own,
importable: a runner pickles the transforms by reference to their module,
which every worker imports (a class of `python -m`'s __main__ is not found
there).
"""

import itertools
import json
import math

import apache_beam as beam
from apache_beam.ml.inference import base as inference
import numpy as np
import tensorflow as tf
from tfx_bsl.public.beam import run_inference
from tfx_bsl.public.proto import model_spec_pb2

from estimator_trainer import outputs
from estimator_trainer.errors import DataError, first_line
from estimator_trainer.tabular import numpy_columns
from estimator_trainer.tabular import parsing
from estimator_trainer.tabular import table
from estimator_trainer.tabular import table_files

# Records parsed and keyed at a time; RunInference batches them again,
# at most _MAX_BATCH a batch: Beam's BatchElements grows a batch to 10,000
# as the rate allows, which took 0.2 GB more peak RSS than 500 (a batch's
# prediction logs), so that longer jobs peaked higher.
_BATCH = 1024
_MAX_BATCH = 1024
# The fields of a line that name its row, as predictions.jsonl's.
PLACE = FILE, LINE, RECORD = ('file', 'line', 'record')


def model_handler(saved_model):
  """The keyed handler of the SavedModel at `saved_model`: its `predict`
  signature (canned's: serialized tf.Examples in, every prediction out).
  ValueError if it has none that takes them."""
  spec = model_spec_pb2.InferenceSpecType(
      saved_model_spec=model_spec_pb2.SavedModelSpec(
          model_path=saved_model, signature_name=['predict']),
      batch_parameters=model_spec_pb2.BatchParameters(
          max_batch_size=_MAX_BATCH))
  return inference.KeyedModelHandler(
      run_inference.CreateModelHandler(spec))


class KeyedExamples(beam.DoFn):
  """The path of an input file -> (key, serialized tf.Example) of each of
  its records: a CSV row parsed by `feature_spec` as training parses it
  (parsing.parse; a bad cell fails naming it, as training's check does),
  a TFRecord's record as it is. The key: the row's place, (FILE, path)
  and (LINE, its number in the file, the header line 1) or (RECORD, from
  1), as the package's errors name them and predictions.jsonl does, and
  (`key_column`, its value) if given."""

  def __init__(self, feature_spec, key_column=None,
               unreadable_as_missing=False):
    super().__init__()
    self._spec, self._key = feature_spec, key_column
    self._unreadable_as_missing = unreadable_as_missing

  def process(self, element):
    if table.is_csv(element):
      yield from self._csv(element)
    else:
      yield from self._tfrecords(element)

  def _csv(self, path):
    lines = table_files.text_lines(path)
    header = table_files.header(path, [text for _, text in
                                       itertools.islice(lines, 1)])
    for column in self._spec.data_columns:
      table_files.check_has(path, column.name, header)
    if self._key:
      table_files.check_has(path, self._key, header, why='--key_column')
    parse = tf.function(lambda records: self._parse_csv(records, header),
                        input_signature=[tf.TensorSpec([None], tf.string)])
    # One tf.Example whose values each row sets: 13 times faster than a
    # new one a row (20 us against 274 for 14 columns).
    example = tf.train.Example()
    places = []
    for column in self._spec.data_columns:
      place = getattr(example.features.feature[column.name],
                      table.LISTS[column.dtype]).value
      place.append(b'' if column.dtype == 'string' else 0)
      places.append(place)
    # Empty lines are no records, as in training's read (source.py).
    records = ((number, text) for number, text in lines if text)
    while batch := list(itertools.islice(records, _BATCH)):
      try:
        raw, keys = parse(tf.constant([text for _, text in batch]))
      except tf.errors.InvalidArgumentError as e:
        raise self._bad_cell(path, batch, e) from None
      columns = [raw[c.name].numpy().tolist() for c in self._spec.data_columns]
      keys = keys.numpy().tolist()
      for i, (number, _) in enumerate(batch):
        key = ((FILE, path), (LINE, number))
        if self._key:
          if not keys[i]:
            raise DataError(f'{path} line {number}, column {self._key!r}: '
                            'no value (an empty cell); each row needs its key')
          key += ((self._key, keys[i].decode()),)
        for place, values in zip(places, columns):
          place[0] = values[i]
        yield key, example.SerializeToString()

  def _parse_csv(self, records, header):
    raw = parsing.parse(self._spec, records, header,
                        self._unreadable_as_missing, labels=False)
    if not self._key:
      return raw, tf.constant([], tf.string)
    keys, = tf.io.decode_csv(records, [tf.constant([''])],
                             select_cols=[header.index(self._key)])
    return raw, keys

  def _bad_cell(self, path, batch, error):
    """The DataError naming the first cell up to `batch` (line number,
    text) that training's check refuses (numpy_columns.features); else the
    parser's `error`, on the batch's lines."""
    names = [c.name for c in self._spec.data_columns]
    for cells in table.csv_chunks([path], names, _BATCH):
      numpy_columns.features(cells, self._spec, self._unreadable_as_missing)
      if cells.numbers and cells.numbers[-1] >= batch[-1][0]:
        break
    return DataError(f'{path} lines {batch[0][0]}-{batch[-1][0]}: '
                     f'{first_line(error.message)}')

  def _tfrecords(self, path):
    number = 0
    try:
      for batch in table_files.records(path).batch(
          _BATCH).as_numpy_iterator():
        for record in batch:
          number += 1
          example = table_files.example_of(record, path, number)
          yield self._record_key(example, path, number), record
    except tf.errors.OpError as e:
      raise DataError(f'{path}: {first_line(e.message)}') from None

  def _record_key(self, example, path, number):
    key = ((FILE, path), (RECORD, number))
    if not self._key:
      return key
    feature = example.features.feature.get(self._key)
    kind = feature.WhichOneof('kind') if feature else None
    values = getattr(feature, kind).value if kind else ()
    if not values or len(values) > 1:
      raise DataError(f'{path} record {number}: feature {self._key!r} (the '
                      '--key_column) needs one value, has '
                      f'{len(values) if values else "none"}')
    value = values[0]
    return key + ((self._key, value.decode() if isinstance(value, bytes)
                   else value),)


# A TensorProto's field of values and numpy dtype, by its dtype's enum
# (tf.make_ndarray's reading at a tenth of its cost: it took more per row
# than the model).
_VALUES = {dtype.as_datatype_enum: (field, dtype.as_numpy_dtype)
           for dtype, field in ((tf.float32, 'float_val'),
                                (tf.float64, 'double_val'),
                                (tf.int32, 'int_val'), (tf.int64, 'int64_val'),
                                (tf.string, 'string_val'))}


def _values(tensor):
  """The values of a predict log's output (a row's): a list or numpy."""
  field, dtype = _VALUES.get(tensor.dtype, (None, None))
  if field and tensor.tensor_content:
    return np.frombuffer(tensor.tensor_content, dtype)
  if field:
    values = getattr(tensor, field)
    if len(values) == math.prod(dim.size for dim in tensor.tensor_shape.dim):
      return list(values)
  return tf.make_ndarray(tensor).ravel()  # Repeated values, other dtypes.


def prediction_line(element):
  """(key, tfx-bsl's PredictionLog) -> a JSON line: the key's fields and
  each output of the predict signature, as predictions.jsonl writes them
  (by name)."""
  key, log = element
  prediction = {name: _values(tensor) for name, tensor in
                log.predict_log.response.outputs.items()}
  line = {**outputs.prediction_fields(prediction), **dict(key)}
  return json.dumps(dict(sorted(line.items())))


def score(pipeline, files, feature_spec, saved_model, output, num_shards=0,
          key_column=None, unreadable_as_missing=False):
  """Scores `files` (paths) into JSON lines, sharded files
  `output`-SSSSS-of-NNNNN.jsonl (`num_shards`, 0: the runner's choice)."""
  return (pipeline
          | 'Files' >> beam.Create(files)
          # A file a worker: one file is read in order, on one.
          | 'Reshuffle' >> beam.Reshuffle()
          | 'Read' >> beam.ParDo(KeyedExamples(feature_spec, key_column,
                                               unreadable_as_missing))
          | 'Score' >> inference.RunInference(model_handler(saved_model))
          | 'Format' >> beam.Map(prediction_line)
          | 'Write' >> beam.io.WriteToText(
              output, file_name_suffix='.jsonl', num_shards=num_shards))
