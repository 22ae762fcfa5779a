"""model_fn: the TRAIN, EVAL and PREDICT graphs of a Keras model under
Estimator, with the package's loss scaling and eval metrics."""

import contextlib

import tensorflow as tf

from estimator_trainer import config_resolved
from estimator_trainer import ema_recipe
from estimator_trainer import gradients as gradients_lib
from estimator_trainer import heads
from estimator_trainer import loss_scale as loss_scale_lib
from estimator_trainer import losses
from estimator_trainer import models
from estimator_trainer import optimizers
from estimator_trainer.estimator import batch_norm_hooks
from estimator_trainer.estimator import moving_average
from estimator_trainer.estimator import step_apply
from estimator_trainer.estimator import train_loop
from estimator_trainer.estimator.params import ModelParams
from estimator_trainer.optimizers import OptimizerSpec
from estimator_trainer.models import tabular as tabular_models
from estimator_trainer.tabular.encoder import EncodedInput

ModeKeys = tf.estimator.ModeKeys


def _batch_reader(features, labels):
  """A function that reads the next (features, labels) from the tf.data
  iterator Estimator read `features` (a dict) and `labels` from (its
  IteratorGetNext),
  a batch per call: a loop of steps reads each step's own batch, as Keras's
  steps_per_execution and TensorFlow's run_steps_on_iterator (TPUEstimator's
  iterations_per_loop) do. A run of any length then takes the stream's next
  batches; windows of K batches per run lost the rest of a window whenever
  a run ended early on a checkpoint, summary, log or last step."""
  tensors = tf.nest.flatten((features, labels))
  get_next = tensors[0].op
  if get_next.type != 'IteratorGetNext' or any(
      tensor.op is not get_next for tensor in tensors):
    raise ValueError('model_fn: steps_per_run > 1 or accumulate_steps > 1 '
                     'needs the TRAIN features and labels of an input_fn '
                     'that returns a tf.data Dataset')

  def read():
    with tf.compat.v1.colocate_with(get_next):
      batch = tf.raw_ops.IteratorGetNext(
          iterator=get_next.inputs[0],
          output_types=get_next.get_attr('output_types'),
          output_shapes=get_next.get_attr('output_shapes'))
    return tf.nest.pack_sequence_as(
        (features, labels), [batch[tensor.value_index] for tensor in tensors])
  return read


def train_steps(step, features, labels, num_steps):
  """`num_steps` (a scalar tensor, 1 or more) training steps in one
  session.run: the first on `features` and `labels`, each next on the next
  batch of the iterator they came from.

  `step(features, labels)` -> (train op, (loss, *outputs)) builds one step;
  returns the train op of the whole run and the last step's (loss,
  *outputs). The first step is built outside the loop: it creates the
  model's and the optimizer's variables, which a loop body cannot. The run
  ends early after a step whose loss is not finite, so that the NaN check
  names that step.
  """
  read = _batch_reader(features, labels)
  first_op, outputs = step(features, labels)

  def body(i, *outputs):
    # The last step's outputs are the loop's; its batch is read after the
    # step before (whose outputs wait for its update).
    with tf.control_dependencies(outputs):
      batch = read()
    op, outputs = step(*batch)
    with tf.control_dependencies([op]):
      return (i + 1, *(tf.identity(output) for output in outputs))

  def more(i, loss, *_):
    return tf.logical_and(i < num_steps, tf.math.is_finite(loss))

  with tf.control_dependencies([first_op]):
    _, *outputs = tf.while_loop(more, body, (tf.constant(1), *outputs),
                                parallel_iterations=1)
  return tf.group(*outputs), outputs


def make_model_fn(build_model=models.cnn, **model_kwargs):
  """An Estimator model_fn (TRAIN, EVAL, PREDICT) of any builder:
  `build_model(input_shape, num_classes, **model_kwargs)` -> Keras model
  (models/), or a --model name.

  The model_fn expects `features = {'image': float32 [batch, H, W, C]}`,
  or on structured data the encoded columns (tabular/), and `params`, a
  dict of `ModelParams`' fields (`global_batch_size` required; `head` and
  `model_input` for structured data). A `'weight'` per example weighs its
  loss and metrics; in EVAL `'padding'` (True) marks rows that are no
  examples (weight them 0 too); TRAIN with `steps_per_run` > 1 reads more
  batches from their iterator. Where `model_input` has a column of either
  name, they come under keys apart from it (models.FeatureKeys: `'_weight'`,
  `'_padding'`).
  """
  def model_fn(features, labels, mode, params):
    params = ModelParams.from_dict(params)
    keys = models.FeatureKeys.of(params.model_input)
    inputs = keys.inputs(features)
    label_smoothing = config_resolved.label_smoothing_of(
        params.label_smoothing, images=params.head is None)
    if params.head is None:  # An image classifier.
      model_input = inputs.shape[1:]
      head = heads.ImageClassifierHead(params.class_names, label_smoothing,
                                       model_input)
    else:
      model_input = {name: EncodedInput(**value)
                     for name, value in params.model_input.items()}
      head = heads.make(params.head, params.class_names, label_smoothing,
                        params.huber_delta, params.label_scale)
    # Evaluation and exports of --ema_decay's averages.
    with (moving_average.reading_averages()
          if params.ema_decay and mode != ModeKeys.TRAIN else
          contextlib.nullcontext()):
      model = models.build(build_model, model_input, head.logits_dimension,
                           model_kwargs, seed=params.seed,
                           precision=params.precision,
                           sync_batch_norm=params.sync_batch_norm,
                           weight_decay=params.weight_decay)
    if mode == ModeKeys.TRAIN:
      batch_norm_hooks.note_training_model(model)
      return _train_spec(model, head, features, labels, params, keys)
    logits = model(inputs, training=False)
    predictions = head.predictions(logits)
    if mode == ModeKeys.PREDICT:
      # A row's key and place, as canned forward_features (the classify
      # and regress outputs take theirs from the head alone).
      predictions = keys.with_forwarded(predictions, features)
      return tf.estimator.EstimatorSpec(
          mode, predictions=predictions,
          export_outputs=head.export_outputs(predictions))

    if mode == ModeKeys.EVAL:
      weights = features.get(keys.weight, tf.ones(tf.shape(logits)[:1]))
      metrics = head.eval_metrics(params.eval_images)
      # A per-replica mean, not a share of the global batch: Estimator
      # averages the replicas' `loss`. `average_loss` is exact over the whole
      # test set.
      return tf.estimator.EstimatorSpec(
          mode, loss=losses.weighted_mean(head.eval_loss(labels, logits),
                                          weights),
          eval_metric_ops=metrics.update(inputs, labels, logits, weights,
                                         features.get(keys.padding)))

  return model_fn


def _train_spec(model, head, features, labels, params, keys):
  """The TRAIN spec: one step per session.run, or up to `steps_per_run`, a
  batch each (the steps train_loop's hook sets for the run); with
  `accumulate_steps` > 1, that many batches each."""
  spec = OptimizerSpec.from_params(params)
  claim = params.step_limit and step_apply.StepClaim(params.step_limit)
  optimizer, learning_rate = spec.v1(claim and claim.step)
  linear = params.linear_optimizer and (
      spec.for_linear_part(params.linear_optimizer,
                           params.linear_learning_rate,
                           params.linear_optimizer_kwargs).v1(
                               claim and claim.step)[0],
      tabular_models.linear_part(model))
  parts = optimizers.by_part(optimizer, model.trainable_variables,
                             linear or None)
  variables = optimizers.variables_of(parts)
  micro_batches = params.accumulate_steps
  read = _batch_reader(features, labels) if micro_batches > 1 else None
  scale = (loss_scale_lib.V1LossScale()
           if params.precision == loss_scale_lib.FLOAT16 else None)
  average = params.ema_decay and moving_average.Average(
      ema_recipe.averaged(model), params.ema_decay)
  batch_norm_hooks.note_average(average)

  def step(features, labels):
    """One optimizer step on `features` and `labels` and, with
    accumulate_steps > 1, on the further micro-batches it reads: the sum
    of their gradients, each of a loss per global batch times the
    micro-batches. Each updates batch norm's moving statistics."""
    gradients = [None] * len(variables)
    loss = correct = 0.0
    updates = []
    for micro_batch in range(micro_batches):
      if micro_batch:  # Read in order, after the one before.
        with tf.control_dependencies(tf.nest.flatten((features, labels))):
          features, labels = read()
      inputs = keys.inputs(features)
      # After the micro-batches before: their batch-norm updates read the
      # moving statistics that those before wrote, k updates in a row.
      with tf.control_dependencies(updates):
        logits = model(inputs, training=True)
      micro_loss = head.replica_training_loss(
          labels, logits, params.global_batch_size, model.losses,
          features.get(keys.weight)) / micro_batches
      gradients = [gradients_lib.add(total, gradient) for total, gradient in
                   zip(gradients, tf.compat.v1.gradients(
                       scale.scaled(micro_loss) if scale else micro_loss,
                       variables))]
      loss += micro_loss
      updates += model.get_updates_for(inputs)
      if head.has_accuracy:
        correct += tf.reduce_sum(head.correct(labels, logits))
    claimed = [claim.claim(gradients)] if claim else []
    # This step's: read before the step counts (or of its claimed count).
    rate = learning_rate()
    # Keras layers' own updates (batch norm's moving statistics) are not in
    # a v1 graph's train op unless put there: this call's, in this graph
    # (in a loop body, not the first step's).
    graph = tf.compat.v1.get_default_graph()
    with tf.control_dependencies([*claimed, rate, *updates, *(
        update for update in model.get_updates_for(None)
        if update.graph is graph)]):
      op, norm = step_apply.train_op(parts, gradients,
                                     params.clip_global_norm, scale,
                                     counted=bool(claim))
    if average:
      with tf.control_dependencies([op]):  # Of the step's weights.
        op = average.update(
            tf.compat.v1.train.get_global_step().read_value())
    # This replica's share of the global batch's accuracy, as its loss is.
    accuracy = (correct / (params.global_batch_size * micro_batches)
                if head.has_accuracy else tf.constant(0.0))
    return op, (loss, accuracy, rate, *([] if norm is None else [norm]))

  if params.steps_per_run > 1:
    op, (loss, accuracy, rate, *norm) = train_steps(
        step, features, labels, train_loop.steps_per_run_variable())
  else:
    op, (loss, accuracy, rate, *norm) = step(features, labels)
  # v1 summaries, which Estimator writes for the first replica only: of the
  # global batch, the same on every replica.
  if head.has_accuracy:
    accuracy = _summed_over_replicas(accuracy)
  tf.compat.v1.summary.scalar('learning_rate', rate)
  if scale:
    with tf.control_dependencies([op]):  # After the step, as TF2's are.
      tf.compat.v1.summary.scalar('loss_scale', tf.identity(scale.scale))
      tf.compat.v1.summary.scalar('skipped_steps',
                                  tf.identity(scale.skipped_steps))
  if head.has_accuracy:
    tf.compat.v1.summary.scalar('accuracy', accuracy)
  if norm:  # Of the summed gradient, before clipping.
    tf.compat.v1.summary.scalar('gradient_norm', norm[0])
  # The sum in the train op: under multi_worker_mirrored every worker must
  # take part in it at every step, and only the chief fetches summaries.
  return tf.estimator.EstimatorSpec(ModeKeys.TRAIN, loss=loss,
                                    train_op=tf.group(op, accuracy))


def _summed_over_replicas(share):
  """The global batch's value of the replicas' shares of it."""
  context = tf.distribute.get_replica_context()
  if context.num_replicas_in_sync == 1:
    return share
  return context.all_reduce(tf.distribute.ReduceOp.SUM, share)


# The seeds' CNN: what the CLI trains by default.
model_fn = make_model_fn()
