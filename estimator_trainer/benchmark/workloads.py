"""The workloads a benchmark worker process runs, each returning interval
rates: the plain Keras `Model.fit` and `tf.estimator.Estimator` references,
the input pipeline alone, and `model_step` (the compute ceiling), each on a `setup`: the TrainConfig values
of the model, precision and data (`{"model": "resnet20", ...}`).

    python -m estimator_trainer.benchmark.workloads '{"kind": "fit", ...}'

prints `RESULT_PREFIX {"rates": [...]}` (and "metrics" of the tabular
peers, `tabular`).
"""

import contextlib
import json
import sys
import tempfile
import time

from estimator_trainer.benchmark.measure import IntervalTimer

# A worker process prints its result on a line starting with this.
RESULT_PREFIX = 'BENCHMARK_RESULT '


def _config(setup):
  """The TrainConfig of `setup`: model, precision and data flags."""
  from estimator_trainer import config as config_lib  # pylint: disable=g-import-not-at-top
  # model_dir is not read by input_fn or the model.
  return config_lib.TrainConfig(model_dir=tempfile.gettempdir(), **setup)


def _package_dataset(setup, batch_size, strategy):
  """The package's TRAIN dataset at this global batch, as Estimator reads
  it, and its DatasetSpec."""
  from estimator_trainer import data  # pylint: disable=g-import-not-at-top
  from estimator_trainer import sources  # pylint: disable=g-import-not-at-top
  from estimator_trainer.strategy import num_replicas  # pylint: disable=g-import-not-at-top
  global_batch = batch_size * num_replicas(strategy)
  config = _config(setup)
  source = sources.make_source(config)
  input_fn = data.make_input_fn(config, global_batch, source)
  return input_fn(data.ModeKeys.TRAIN), global_batch, source.spec


def _model(setup, spec):
  from estimator_trainer import models  # pylint: disable=g-import-not-at-top
  config = _config(setup)
  return models.build(config.model, spec.image_shape, spec.num_classes,
                      config.model_kwargs, seed=42,
                      precision=config.precision)


def run_fit(setup, strategy, steps, batch_size, every_steps, cpu_replicas):
  """Model.fit of the model on the package's data, set up as a user of
  plain tf.keras would (the outside reference)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from estimator_trainer.strategy import make_strategy  # pylint: disable=g-import-not-at-top
  strategy = make_strategy(strategy, cpu_replicas)
  dataset, global_batch, spec = _package_dataset(setup, batch_size, strategy)
  # Keras feeds a Sequential model a tensor, not the features dict.
  dataset = dataset.map(lambda features, labels: (features['image'], labels))
  timer = IntervalTimer(global_batch, every_steps)
  scope = strategy.scope() if strategy else contextlib.nullcontext()
  with scope:
    model = _model(setup, spec)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(1e-3),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=['accuracy'])
  # A batch-end callback that wants numpy logs makes fit wait for every
  # step, as a session.run per step does.
  callback = tf.keras.callbacks.LambdaCallback(
      on_train_batch_end=lambda batch, logs: timer.step())
  model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[callback],
            verbose=0)
  return timer.rates


def run_plain_estimator(setup, strategy, steps, batch_size, every_steps,
                        cpu_replicas):
  """tf.estimator.Estimator as its users write it (the outside reference of
  the estimator engine): the same model and input_fn, the tf.compat.v1
  loss and Adam's `minimize`, RunConfig's defaults but the summary
  cadence; timed by a hook."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from estimator_trainer import data  # pylint: disable=g-import-not-at-top
  from estimator_trainer import sources  # pylint: disable=g-import-not-at-top
  from estimator_trainer.strategy import make_strategy, num_replicas  # pylint: disable=g-import-not-at-top
  strategy = make_strategy(strategy, cpu_replicas)
  global_batch = batch_size * num_replicas(strategy)
  config = _config(setup)
  source = sources.make_source(config)
  timer = IntervalTimer(global_batch, every_steps)

  def model_fn(features, labels, mode):
    model = _model(setup, source.spec)
    logits = model(features['image'], training=mode == 'train')
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(
        loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

  class TimerHook(tf.compat.v1.train.SessionRunHook):

    def after_run(self, run_context, run_values):
      timer.step()

  with tempfile.TemporaryDirectory() as model_dir:
    estimator = tf.estimator.Estimator(
        model_fn, model_dir=model_dir, config=tf.estimator.RunConfig(
            train_distribute=strategy, save_summary_steps=every_steps))
    estimator.train(data.make_input_fn(config, global_batch, source),
                    max_steps=steps, hooks=[TimerHook()])
  return timer.rates


def run_input_pipeline(setup, steps, batch_size, every_steps, cpu_replicas):
  """Iterates the package's TRAIN dataset eagerly."""
  del cpu_replicas  # One pipeline, no strategy.
  dataset, global_batch, _ = _package_dataset(setup, batch_size, None)
  timer = IntervalTimer(global_batch, every_steps)
  for _ in dataset.take(steps):
    timer.step()
  return timer.rates


def run_model_step(setup, steps, batch_size, every_steps, cpu_replicas):
  """Training steps on one in-memory batch, `every_steps` per call: no
  input pipeline, no framework, one sync per interval."""
  del cpu_replicas  # No strategy.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dataset, global_batch, spec = _package_dataset(setup, batch_size, None)
  features, labels = next(iter(dataset))
  images = features['image']
  model = _model(setup, spec)
  optimizer = tf.keras.optimizers.Adam(1e-3)
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @tf.function
  def train_steps(num_steps):
    loss = tf.constant(0.0)
    for _ in tf.range(num_steps):
      with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(images, training=True))
      gradients = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss

  rates = []
  for _ in range(steps // every_steps):
    start = time.perf_counter()
    train_steps(tf.constant(every_steps)).numpy()
    rates.append(every_steps * global_batch / (time.perf_counter() - start))
  return rates


def run(kind, setup, strategy, steps, batch_size, every_steps, cpu_replicas):
  """The result of workload `kind` on `setup`: {'rates': interval rates}
  and, of the tabular peers (`tabular.WORKLOADS`, default strategy only),
  'metrics'. `setup`: the TrainConfig values of the model, precision and
  data (fit, plain_estimator, input, step) or the census set's
  (`tabular`, `tabular_parts`)."""
  if kind in ('fit', 'plain_estimator'):
    workload = run_fit if kind == 'fit' else run_plain_estimator
    return {'rates': workload(setup, strategy, steps, batch_size,
                              every_steps, cpu_replicas)}
  if kind in ('input', 'step'):
    workload = {'input': run_input_pipeline, 'step': run_model_step}[kind]
    return {'rates': workload(setup, steps, batch_size, every_steps,
                              cpu_replicas)}
  from estimator_trainer.benchmark import tabular  # pylint: disable=g-import-not-at-top
  from estimator_trainer.benchmark import tabular_parts  # pylint: disable=g-import-not-at-top
  workloads = {**tabular.WORKLOADS, **tabular_parts.WORKLOADS}
  return workloads[kind](setup, steps, batch_size, every_steps)


if __name__ == '__main__':
  result = run(**json.loads(sys.argv[1]))
  print(RESULT_PREFIX + json.dumps(result), flush=True)
