"""The streaming statistics pass (tabular/scan.py, summaries.py): equal to
the exact pass over the whole split in memory on small data, mergeable
across files, within the quantile sketch's rank error past the exact
size, with a progress bar."""

import concurrent.futures
import json
import os
import pickle
import re
import sys
import time

import numpy as np
import pytest

from estimator_trainer import layout
from estimator_trainer.errors import DataError, TrainerError
from estimator_trainer import sources
from estimator_trainer.benchmark import census
from estimator_trainer.tabular.statistics import scan
from estimator_trainer.tabular.statistics import shares
from estimator_trainer.tabular.statistics import split_summary
from estimator_trainer.tabular import spec as spec_lib
from estimator_trainer.tabular import statistics
from estimator_trainer.tabular.statistics import summaries
from estimator_trainer.tabular.statistics import training_files
from estimator_trainer.tabular import table_files
from estimator_trainer.tabular.source import TabularSource
from estimator_trainer.tabular.spec import Column, FeatureSpec
import kept_output

TRAIN, TEST = sources.TRAIN, sources.TEST
ROWS = 3000

# Every kind with statistics, missing cells (0.1) and a weight column.
SPEC = FeatureSpec(
    (Column('age', 'float_discretized', num_bins=5),
     Column('capital_gain', 'float'),
     Column('hours_per_week', 'float_normalized'),
     Column('workclass', 'string_categorical'),
     Column('education', 'string_categorical', default='none'),
     Column('user_id', 'string_hashed', num_bins=64)),
    census.LABEL, label_vocabulary=census.LABEL_VOCABULARY,
    weight=census.WEIGHT, head='binary')
REGRESSION = FeatureSpec(SPEC.columns, census.WEIGHT, head='regression')
# Continuous values: a sketch's or a sum's rounding would show.
CONTINUOUS = FeatureSpec(
    (Column(census.WEIGHT, 'float_discretized', num_bins=7),
     Column('hours_per_week', 'float_normalized')), census.LABEL,
    label_vocabulary=census.LABEL_VOCABULARY, head='binary')


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('census'))
  census.write(path, ROWS, num_shards=3, missing=0.1, weights=True)
  return path


def _source(data_dir, file_format, spec=SPEC):
  return TabularSource({TRAIN: census.files(data_dir, 'train', file_format),
                        TEST: census.files(data_dir, 'test', file_format)},
                       spec)


@pytest.mark.parametrize('file_format', ['csv', 'tfrecord'])
@pytest.mark.parametrize('spec', [SPEC, REGRESSION, CONTINUOUS],
                         ids=['binary', 'regression', 'continuous'])
def test_the_streaming_pass_equals_the_exact_one(data_dir, file_format,
                                                 spec):
  source = _source(data_dir, file_format, spec)
  exact = statistics.compute(spec, source.columns(TRAIN))
  streamed = statistics.of_summary(spec, scan.summarise(source, TRAIN))
  assert streamed == exact
  assert streamed.num_examples == ROWS
  assert set(streamed.columns) == {c.name for c in spec.columns
                                   if c.kind != 'string_hashed'}


def test_summaries_of_files_merge_to_the_whole_past_the_exact_size(
    data_dir, monkeypatch):
  # Moments and a sketch from the 100th value on: a split too big to keep.
  monkeypatch.setattr(summaries, 'EXACT_VALUES', 100)
  source = _source(data_dir, 'csv')
  files = source.files(TRAIN)
  merged = scan.summarise(source, TRAIN, files=files[:1]).merge(
      scan.summarise(source, TRAIN, files=files[1:]))
  streamed = statistics.of_summary(SPEC, merged)
  exact = statistics.compute(SPEC, source.columns(TRAIN))
  assert streamed.num_examples == exact.num_examples == ROWS
  hours, exact_hours = (s.columns['hours_per_week'] for s in
                        (streamed, exact))
  assert hours.mean == pytest.approx(exact_hours.mean, rel=1e-12)
  assert hours.variance == pytest.approx(exact_hours.variance, rel=1e-12)
  assert (streamed.columns['workclass'].vocabulary ==
          exact.columns['workclass'].vocabulary)
  ages = np.sort(source.columns(TRAIN)['age'])
  ages = ages[~np.isnan(ages)]
  for boundary, wanted in zip(streamed.columns['age'].boundaries,
                              exact.columns['age'].boundaries):
    # The sketch's boundary's rank within its error of the exact one's.
    ranks = np.searchsorted(ages, [boundary, wanted]) / ages.size
    assert abs(ranks[0] - ranks[1]) <= summaries.rank_error() + 1 / 100


@pytest.mark.parametrize('file_format', ['csv', 'tfrecord'])
def test_a_cluster_of_more_trainers_than_files_summarises_the_split(
    data_dir, file_format, tmp_path):
  """A trainer's share of a cluster of more trainers than training files
  (the chaos script's 3 trainers on 2 census files) holds no file: it is
  empty, not an IndexError that failed every trainer of a TFRecord set at
  every restart (issue 73, item 1)."""
  source = _source(data_dir, file_format)
  count = len(source.files(TRAIN)) + 2
  shares.store_share(str(tmp_path), source, 'binary', count - 1, count)
  merged = shares.summarise(str(tmp_path), source, 'binary', count)
  assert statistics.of_summary(SPEC, merged) == statistics.of_summary(
      SPEC, scan.summarise(source, TRAIN))


@pytest.mark.parametrize('at_batch', [0, 1, 2])
def test_a_batch_python_must_look_at_is_read_again_alone(data_dir,
                                                         monkeypatch,
                                                         at_batch):
  """TFRecord files go through one pipeline; from a batch Python must look
  at on, the pass reads file by file: the files before it count once, its
  file's batches before it are taken back."""
  monkeypatch.setattr(scan, '_BATCH', 600)  # 1,000 rows a file.
  source = _source(data_dir, 'tfrecord')
  exact = statistics.compute(SPEC, source.columns(TRAIN))
  values, calls = scan._values, []

  def recheck_once(*args):
    calls.append(None)
    if len(calls) == at_batch * 2 + 2:  # Another file's second batch.
      raise scan._Recheck()
    return values(*args)

  monkeypatch.setattr(scan, '_values', recheck_once)
  assert statistics.of_summary(SPEC, scan.summarise(source, TRAIN)) == exact


def test_a_vocabulary_has_a_size_cap_and_a_frequency_threshold():
  counts = summaries.Counts()
  counts.add(np.array(['b', 'a', 'c', 'a', 'b', 'a', 'd']))
  counts.merge(summaries.Counts()).add(['c'], [1])
  assert counts.vocabulary() == ('a', 'b', 'c', 'd')
  assert counts.vocabulary(min_count=2) == ('a', 'b', 'c')
  assert counts.vocabulary(max_size=2) == ('a', 'b')
  assert counts.vocabulary(leave_out={'a'}) == ('b', 'c', 'd')


def test_a_vocabulary_past_the_tracked_values_is_said_to_be_approximate(
    monkeypatch, caplog):
  """Past MAX_TRACKED distinct values the counts are a Misra-Gries
  summary's: the vocabulary is of the most frequent, and the run says so
  with the counts' error."""
  monkeypatch.setattr(summaries, 'MAX_TRACKED', 4)
  spec = FeatureSpec((Column('c', 'string_categorical'),), 'y',
                     head='binary')
  summary = split_summary.SplitSummary(spec, 'binary')
  summary.add_columns({'c': np.array(['a'] * 3 + list('bcdefg'), object),
                       'y': np.zeros(9, np.int64)})
  stats = statistics.of_summary(spec, summary)
  assert stats.columns['c'].vocabulary[0] == 'a'
  assert len(stats.columns['c'].vocabulary) < 7
  assert ("Column 'c' has more than 4 distinct values: its counts are at "
          'most 1 under the true ones') in caplog.text
  caplog.clear()
  monkeypatch.setattr(summaries, 'MAX_TRACKED', 100)
  summary = split_summary.SplitSummary(spec, 'binary')
  summary.add_columns({'c': np.array(list('abc'), object),
                       'y': np.zeros(3, np.int64)})
  statistics.of_summary(spec, summary)
  assert 'distinct values' not in caplog.text


def test_a_bad_value_fails_naming_it_and_a_test_split_is_checked(
    tmp_path, capsys):
  train, test = tmp_path / 'train.csv', tmp_path / 'test.csv'
  spec = FeatureSpec((Column('x', 'float_normalized'),), 'y', head='binary')
  rows = ''.join(f'{i},{i % 2}\n' for i in range(200_000))
  train.write_text('x,y\n' + rows)
  test.write_text('x,y\n1,0\ninf,1\n')  # ('nan' is a missing value.)
  source = TabularSource({TRAIN: str(train), TEST: str(test)}, spec)
  assert statistics.of_summary(
      spec, scan.summarise(source, TRAIN)).columns['x'].mean == 99_999.5
  assert 'rows/s' in capsys.readouterr().err  # The progress bar's.
  with pytest.raises(Exception, match=r"test.csv line 3, column 'x': 'inf' "
                     'is not a finite number'):
    scan.summarise(source, TEST)


def test_a_run_counts_the_records_once(data_dir, tmp_path, monkeypatch):
  """At 20 million records a count takes tens of seconds: the pass, the
  step count and the input pipelines share one. The count by frames is
  the reader's; a truncated file's is none (the reader then says why)."""
  source = _source(data_dir, 'tfrecord')
  counted = []
  framed = table_files._framed_records  # pylint: disable=protected-access
  monkeypatch.setattr(table_files, '_framed_records',
                      lambda path: counted.append(path) or framed(path))
  statistics.load_or_compute(str(tmp_path / 'model'), SPEC, source)
  assert sum(source.file_sizes(TRAIN)) == source.num_examples(TRAIN) == sum(
      len(list(table_files.records(path))) for path in source.files(TRAIN))
  source.records(TRAIN, num_shards=2, index=1)
  assert sorted(counted) == sorted(source.files(TRAIN))
  truncated = tmp_path / 'truncated.tfrecord'
  truncated.write_bytes(open(source.files(TRAIN)[0], 'rb').read()[:-1])
  assert framed(str(truncated)) is None
  # Counted in windows (of 64 MB), frames across their ends.
  monkeypatch.setattr(table_files, '_COUNT_WINDOW', 100)
  assert [framed(path) for path in source.files(TRAIN)] == list(
      source.file_sizes(TRAIN))
  assert framed(str(truncated)) is None
  (tmp_path / 'empty.tfrecord').write_bytes(b'')
  assert framed(str(tmp_path / 'empty.tfrecord')) == 0


def test_a_cluster_chief_takes_the_shares_other_trainers_stored(
    data_dir, tmp_path, caplog):
  source = _source(data_dir, 'csv')
  alone = statistics.load_or_compute(str(tmp_path / 'alone'), SPEC, source)
  model_dir = tmp_path / 'cluster'
  # Trainer 2 of 3 stores its share and waits for the chief, who summarises
  # 0 and 1 itself; then trainer 2 reads the statistics and deletes its
  # share.
  with concurrent.futures.ThreadPoolExecutor(1) as pool:
    trainer = pool.submit(statistics.load_or_compute, str(model_dir), SPEC,
                          source, is_chief=False, share=(2, 3))
    deadline = time.monotonic() + 60
    while not list(model_dir.glob('preprocessing/summaries/*-2-of-3.json')):
      assert time.monotonic() < deadline and not trainer.done(), trainer
      time.sleep(0.05)
    with caplog.at_level('INFO'):
      chiefs = statistics.load_or_compute(str(model_dir), SPEC, source,
                                          share=(0, 3))
    assert trainer.result(timeout=60) == chiefs == alone
  assert '1 of 2 shares summarised by other tasks' in caplog.text
  assert not list(model_dir.glob('preprocessing/summaries/*'))


def test_a_share_an_earlier_version_stored_is_not_taken(
    data_dir, tmp_path, monkeypatch, caplog):
  """A share of another format (stored by an earlier version, by a run that
  failed before its chief merged it) is summarised again, not merged."""
  source = _source(data_dir, 'csv')
  model_dir = str(tmp_path / 'model')
  with monkeypatch.context() as patch:
    patch.setattr(summaries, 'FORMAT', summaries.FORMAT - 1)
    shares.store_share(model_dir, source, 'binary', 1, 2)
  assert list((tmp_path / 'model').glob('preprocessing/summaries/*-1-of-2.*'))
  with caplog.at_level('INFO'):
    merged = shares.summarise(model_dir, source, 'binary', 2)
  assert '0 of 1 shares summarised by other tasks' in caplog.text
  assert statistics.of_summary(SPEC, merged) == statistics.compute(
      SPEC, source.columns(TRAIN))


def _summaries_round_trip(summary):
  return type(summary).from_dict(json.loads(json.dumps(summary.to_dict())))


def test_summaries_are_json_and_read_back_the_same(monkeypatch):
  """Counts keep integer values ints and string values strings, with their
  error past the cap; Numbers their exact values, or moments and sketch."""
  monkeypatch.setattr(summaries, 'MAX_TRACKED', 4)
  for values, pruned in ((np.array([3, 1, 3, 7, 2, 9, 4, 3]), True),
                         (np.array(list('abca')), False)):
    counts = summaries.Counts()
    counts.add(values)
    back = _summaries_round_trip(counts)
    assert (back.counts, back.error) == (counts.counts, counts.error)
    assert back.pruned == pruned
    assert {type(value) for value in back.counts} == {type(values[0].item())}
  monkeypatch.setattr(summaries, 'EXACT_VALUES', 100)
  for size in (50, 500):  # Exact; moments and a sketch.
    numbers = summaries.Numbers(quantiles=True)
    numbers.add(np.random.default_rng(0).normal(size=size))
    back = _summaries_round_trip(numbers)
    assert back.result(4) == numbers.result(4)
    assert (back.values() is None) == (size > 100)
    back.merge(numbers)
    assert back.count == 2 * size


def _ages(path, ages):
  path.write_text('age,y\n' + ''.join(f'{age},{i % 2}\n'
                                      for i, age in enumerate(ages)))


AGES = FeatureSpec((Column('age', 'float_normalized'),), 'y', head='binary')


@pytest.fixture
def age_files(tmp_path):
  """Two CSV files of 2-digit ages; `rewrite(i)` adds 30 to file i's ages:
  as many rows and bytes, a later modification time."""
  paths = [tmp_path / 'data' / f'ages-{i}.csv' for i in range(2)]
  paths[0].parent.mkdir()
  for i, path in enumerate(paths):
    _ages(path, range(20 + i, 60, 3))
  _ages(tmp_path / 'data' / 'test.csv', [30, 40])

  def rewrite(i, add=30):
    before = paths[i].stat()
    _ages(paths[i], [int(age) + add for age in np.loadtxt(
        paths[i], delimiter=',', skiprows=1)[:, 0]])
    os.utime(paths[i], ns=(before.st_atime_ns,
                           before.st_mtime_ns + 1_000_000_000))
    assert paths[i].stat().st_size == before.st_size

  return str(tmp_path / 'data' / 'ages-*.csv'), rewrite


def _ages_source(pattern):
  return TabularSource({TRAIN: pattern, TEST: os.path.join(
      os.path.dirname(pattern), 'test.csv')}, AGES)


def test_a_share_is_json_keyed_by_the_files_modification_times(
    age_files, tmp_path, caplog):
  """A share stored before its file was rewritten (the same rows, bytes and
  name) is not merged: the review's chief took it (age mean 39.21 where
  alone 54.22)."""
  pattern, rewrite = age_files
  model_dir = str(tmp_path / 'model')
  shares.store_share(model_dir, _ages_source(pattern), 'binary', 1, 2)
  [path] = (tmp_path / 'model').glob('preprocessing/summaries/*-1-of-2.json')
  assert json.loads(path.read_text())['format'] == summaries.FORMAT
  rewrite(1)
  source = _ages_source(pattern)
  with caplog.at_level('INFO'):
    merged = shares.summarise(model_dir, source, 'binary', 2)
  assert '0 of 1 shares summarised by other tasks' in caplog.text
  assert statistics.of_summary(AGES, merged) == statistics.compute(
      AGES, source.columns(TRAIN))


def test_a_share_that_is_no_share_is_a_data_error_naming_it(
    age_files, tmp_path):
  """Nothing in it runs: a pickle's payload is not executed."""
  pattern, _ = age_files
  source = _ages_source(pattern)
  model_dir = str(tmp_path / 'model')
  shares.store_share(model_dir, source, 'binary', 1, 2)
  [path] = (tmp_path / 'model').glob('preprocessing/summaries/*-1-of-2.json')
  ran = tmp_path / 'ran'
  for text in (pickle.dumps(_Payload(str(ran))),
               json.dumps({'format': summaries.FORMAT, 'summary': {}}),
               path.read_text().replace('"age"', '"other"')):
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(DataError, match=f'^{re.escape(str(path))}: not a '
                       r'statistics share of this version \(\w+Error: .*\); '
                       'delete it$'):
      shares.summarise(model_dir, source, 'binary', 2)
  assert not ran.exists()


class _Payload:

  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return open, (self.path, 'w')


def test_statistics_of_other_files_and_no_checkpoint_are_computed_again(
    age_files, tmp_path, caplog):
  """A run that failed before its first step left statistics; the data
  fixed since, the next run computes them again (a task other than the
  chief waits for those); with a checkpoint it keeps them, as its model
  was trained on them."""
  pattern, rewrite = age_files
  model_dir = str(tmp_path / 'model')
  first = statistics.load_or_compute(model_dir, AGES, _ages_source(pattern))
  rewrite(1)
  source = _ages_source(pattern)
  with pytest.raises(TrainerError, match='the chief did not write'):
    statistics.load_or_compute(model_dir, AGES, source, is_chief=False,
                               timeout_secs=0.5)
  with caplog.at_level('WARNING'):
    fresh = statistics.load_or_compute(model_dir, AGES, source)
  assert 'of other training files than these, and no checkpoint' in (
      caplog.text)
  assert fresh == statistics.compute(AGES, source.columns(TRAIN)) != first
  assert statistics.read(layout.statistics_file(model_dir)) == fresh
  (tmp_path / 'model' / layout.CHECKPOINT_STATE_FILE).write_text('')
  rewrite(0)
  caplog.clear()
  with caplog.at_level('WARNING'):
    assert statistics.load_or_compute(model_dir, AGES,
                                      _ages_source(pattern)) == fresh
  assert 'differ from these stored statistics' in caplog.text


def _beam_argv(data_dir, tmp_path):
  """beam_statistics' flags for the census files into tmp_path/model."""
  spec_file = tmp_path / 'spec.json'
  spec_file.write_text(spec_lib.to_json(SPEC))
  return [f'--train_files={census.files(data_dir, "train", "csv")}',
          f'--eval_files={census.files(data_dir, "test", "csv")}',
          f'--feature_spec={spec_file}', f'--model_dir={tmp_path / "model"}']


def test_the_beam_pipeline_writes_the_in_process_statistics(data_dir,
                                                            tmp_path, capsys):
  """And run again, keeps them, saying so in a line (it said nothing)."""
  pytest.importorskip('apache_beam')
  from estimator_trainer.tabular import beam_statistics  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / 'model')
  argv = [*_beam_argv(data_dir, tmp_path), '--', '--runner=DirectRunner']
  beam_statistics.run(argv)
  in_process = statistics.compute(SPEC, _source(data_dir, 'csv').columns(
      TRAIN))
  path = layout.statistics_file(model_dir)
  assert statistics.read(path) == in_process
  # The trainer reads them as its own.
  assert statistics.load_or_compute(model_dir, SPEC, None,
                                    is_chief=False) == in_process
  capsys.readouterr()
  beam_statistics.run(argv)
  assert capsys.readouterr().out == (
      f'{path}: kept, they are of these training files; nothing computed '
      '(to compute them again, delete it or give another --model_dir)\n')


@pytest.mark.slow  # 3 Python processes that import TensorFlow (1 warm).
def test_beam_runs_its_transforms_in_other_processes(data_dir, tmp_path):
  """DirectRunner's multi-processing mode pickles the transforms to 2
  worker processes, as a distributed runner does: they are importable (as
  classes of `python -m`'s __main__ they were not found there:
  "AttributeError: Can't get attribute 'MergeSummaries' on
  sdk_worker_main"). The statistics stored are the in-process pass's, byte
  for byte."""
  pytest.importorskip('apache_beam')
  command = [sys.executable, '-m',
             'estimator_trainer.tabular.beam_statistics',
             *_beam_argv(data_dir, tmp_path), '--', '--direct_num_workers=2',
             '--direct_running_mode=multi_processing']
  result = kept_output.run_ok(command)
  alone = str(tmp_path / 'alone')
  statistics.load_or_compute(alone, SPEC, _source(data_dir, 'csv'))
  path = layout.statistics_file(str(tmp_path / 'model'))
  assert result.stdout.endswith(
      f'{path}: the statistics of {ROWS} training examples\n')
  with open(path, 'rb') as beam, open(layout.statistics_file(alone),
                                      'rb') as in_process:
    assert beam.read() == in_process.read()


def test_a_beam_worker_reads_its_own_file_alone(age_files, tmp_path):
  """Each worker counted every training file first (the split's record
  counts): another file's bad bytes failed this file's summary."""
  pytest.importorskip('apache_beam')
  from estimator_trainer.tabular.statistics import beam_transforms  # pylint: disable=g-import-not-at-top
  pattern, _ = age_files
  other = tmp_path / 'data' / 'ages-1.csv'
  other.write_bytes(other.read_bytes() + b'\xff\xfe,1\n')  # Not UTF-8.
  source = _ages_source(pattern)
  summarise = beam_transforms.SummariseFile((source.patterns, AGES, {}),
                                            'binary')
  summarise.setup()
  mine = str(tmp_path / 'data' / 'ages-0.csv')
  [(place, summary)] = summarise.process((1, mine))
  assert place == 1
  assert statistics.of_summary(AGES, summary) == statistics.compute(
      AGES, source.columns(TRAIN, files=[mine]))


def test_beam_merges_the_files_summaries_in_their_order():
  """Whatever order the workers finish in, exact values concatenate as
  in-process: 1e16, -1e16, 1 sum to 1 in the files' order, to 0 in
  another (the mean's last bits differed so on real data)."""
  pytest.importorskip('apache_beam')
  from estimator_trainer.tabular.statistics import beam_transforms  # pylint: disable=g-import-not-at-top
  spec = FeatureSpec((Column('x', 'float_normalized'),), 'y', head='binary')
  files = []
  for value in (1e16, -1e16, 1.0):
    files.append(split_summary.SplitSummary(spec))
    files[-1].add_columns({'x': np.array([value]), 'y': np.zeros(1, int)})
  in_process = split_summary.SplitSummary(spec)
  for summary in files:
    in_process.merge(summary)
  merge = beam_transforms.MergeSummaries(spec, 'binary')
  late = merge.add_input(merge.create_accumulator(), (2, files[2]))
  early = merge.add_input(merge.add_input(merge.create_accumulator(),
                                          (1, files[1])), (0, files[0]))
  merged = merge.extract_output(merge.merge_accumulators([late, early]))
  assert merged.numbers['x'].result() == in_process.numbers['x'].result()
  assert merged.numbers['x'].result()[0] == 1 / 3


def test_a_workers_data_error_is_the_commands_line(age_files, tmp_path,
                                                   monkeypatch):
  """A runner of worker processes relays a worker's DataError as a
  RuntimeError holding its traceback (the command said "error:
  RuntimeError: Traceback (most recent call last):"): it is the worker's
  error again, the command's one line."""
  pytest.importorskip('apache_beam')
  from estimator_trainer.tabular import beam_statistics  # pylint: disable=g-import-not-at-top
  from estimator_trainer.tabular.statistics import beam_transforms  # pylint: disable=g-import-not-at-top
  line = "b.csv line 3, column 'age': 'abc' is not a number"
  relayed = RuntimeError(  # As DirectRunner's multi-processing mode's.
      'Traceback (most recent call last):\n  File "apache_beam/runners/'
      'common.py", line 1495, in process\n'
      f"estimator_trainer.errors.DataError: {line} [while running "
      "'Summarise']\n")

  def fail(*args):
    raise relayed

  monkeypatch.setattr(beam_transforms, 'store', fail)
  pattern, _ = age_files
  spec_file = tmp_path / 'spec.json'
  spec_file.write_text(spec_lib.to_json(AGES))
  argv = [f'--train_files={pattern}', f'--feature_spec={spec_file}',
          f'--eval_files={os.path.dirname(pattern)}/test.csv',
          f'--model_dir={tmp_path / "model"}']
  with pytest.raises(DataError) as raised:
    beam_statistics.run(argv)
  assert str(raised.value) == f"{line} [while running 'Summarise']"
  relayed = RuntimeError('Traceback (most recent call last):\nOSError: x')
  with pytest.raises(RuntimeError):
    beam_statistics.run(argv)


def test_the_training_files_record_is_of_absolute_paths(tmp_path,
                                                       monkeypatch):
  """A run resumed in another directory, or migrate's carried run (whose
  model.json has the paths absolute), has the same training files as the
  relative command that stored the statistics: no second pass, no stale
  statistics (the record had the paths as typed)."""
  (tmp_path / 'd.csv').write_text('age,y\n1,0\n2,1\n')
  monkeypatch.chdir(tmp_path)
  spec = FeatureSpec((Column('age', 'float'),), 'y', head='binary')
  relative, absolute = (
      training_files.of(TabularSource({TRAIN: path}, spec, eval_fraction=0.2))
      for path in ('d.csv', str(tmp_path / 'd.csv')))
  assert relative == absolute
  assert relative['files'][0][0] == str(tmp_path / 'd.csv')
