"""TensorBoard content beyond Estimator's own: eval images, the run's
examples/s (the HParams plugin's: hparams.py)."""

import functools
import io
import math

import numpy as np
import tensorflow as tf



def scalar_summary(writer, tag, value, step):
  writer.add_summary(
      tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
          tag=tag, simple_value=value)]), step)


def tagged_as_estimator(key, serialized):
  """The Summary `serialized` (an eval metric's value) with its values tagged
  `<key>/<i>`, as Estimator writes them: both engines' model_dir/eval alike."""
  summary = tf.compat.v1.Summary.FromString(serialized)
  for i, value in enumerate(summary.value):
    value.tag = f'{key}/{i}'
  return summary.SerializeToString()


def _image_summary(tag, png):
  """A serialized v1 Summary holding one PNG: what Estimator writes to
  model_dir/eval when an eval metric's value is a string."""
  image = tf.image.decode_png(png)
  return tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
      tag=tag, image=tf.compat.v1.Summary.Image(
          height=image.shape[0], width=image.shape[1],
          colorspace=image.shape[2], encoded_image_string=png))
                                    ]).SerializeToString()


def _figure_png(figure):
  buffer = io.BytesIO()
  figure.savefig(buffer, format='png', dpi=100)
  return buffer.getvalue()


# Past this many classes the names and counts would overlap: shading only.
_LABELLED_CLASSES = 20


# Both images are drawn on every evaluation: fixed margins, not matplotlib's
# tight layout (which draws twice), and the misclassified grid is one image
# in one axes, not an axes per image (here the two took 0.6 s, not 1.3 s).


def render_confusion_matrix(matrix, class_names):
  """PNG of a confusion matrix: counts, shaded by row (true class)."""
  from matplotlib import figure as figure_lib  # pylint: disable=g-import-not-at-top
  matrix = np.asarray(matrix)
  rates = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
  figure = figure_lib.Figure(figsize=(7, 6.5))
  figure.subplots_adjust(left=0.16, right=0.98, bottom=0.16, top=0.98)
  axes = figure.add_subplot()
  axes.imshow(rates, cmap='Blues', vmin=0, vmax=1)
  axes.set_xlabel('predicted')
  axes.set_ylabel('true')
  if len(class_names) > _LABELLED_CLASSES:
    return _figure_png(figure)
  ticks = np.arange(len(class_names))
  axes.set_xticks(ticks, class_names, rotation=45, ha='right')
  axes.set_yticks(ticks, class_names)
  for (row, col), count in np.ndenumerate(matrix):
    axes.text(col, row, f'{count:.0f}', ha='center', va='center', fontsize=7,
              color='white' if rates[row, col] > 0.5 else 'black')
  return _figure_png(figure)


def render_misclassified(images, labels, predictions, class_names,
                         columns=4):
  """PNG of a grid of images (values in [0, 1]), each titled with its true
  and predicted labels."""
  from matplotlib import figure as figure_lib  # pylint: disable=g-import-not-at-top
  images = np.clip(np.asarray(images, np.float32), 0, 1)
  if images.shape[-1] == 1:
    images = 1 - np.repeat(images, 3, axis=-1)  # Dark digits on white.
  height, width = images.shape[1:3]
  rows = max(1, math.ceil(len(images) / columns))
  # Each cell: room for a two-line title above the image, a margin around.
  title, margin = height * 2 // 3, max(1, width // 14)
  cell_height, cell_width = title + height + margin, width + 2 * margin
  grid = np.ones((rows * cell_height, columns * cell_width, 3), np.float32)
  figure = figure_lib.Figure(figsize=(columns * 1.8,
                                      columns * 1.8 * grid.shape[0] /
                                      grid.shape[1]))
  axes = figure.add_axes((0, 0, 1, 1))
  axes.axis('off')
  for i, (image, label, prediction) in enumerate(
      zip(images, labels, predictions)):
    top = i // columns * cell_height + title
    left = i % columns * cell_width + margin
    grid[top:top + height, left:left + width] = image
    axes.text(left + width / 2, top - 1, f'true: {class_names[label]}\n'
              f'pred: {class_names[prediction]}', ha='center', va='bottom',
              fontsize=8)
  axes.imshow(grid, interpolation='nearest')
  return _figure_png(figure)


class _ImageMetric(tf.keras.metrics.Metric):
  """A metric of non-scalar weights, reset to zeros."""

  def reset_state(self):
    for weight in self.weights:
      weight.assign(tf.zeros_like(weight))


class ConfusionMatrixImage(_ImageMetric):
  """Eval metric whose value is a confusion-matrix image summary.

  The counts are summed over replicas like any metric; Estimator writes a
  string-valued metric to model_dir/eval as the Summary it holds.
  """

  def __init__(self, class_names, name='confusion_matrix'):
    super().__init__(name=name)
    self._class_names = tuple(class_names)
    size = len(class_names)
    self._matrix = self.add_weight('matrix', shape=(size, size),
                                   initializer='zeros')

  def update_state(self, labels, predictions, sample_weight):
    self._matrix.assign_add(tf.math.confusion_matrix(
        labels, predictions, num_classes=len(self._class_names),
        weights=sample_weight, dtype=tf.float32))

  def result(self):
    return tf.py_function(
        functools.partial(_confusion_summary, self.name, self._class_names),
        [self._matrix], tf.string)


class MisclassifiedImage(_ImageMetric):
  """Eval metric whose value is an image summary of the first misclassified
  test images, with their true and predicted labels.

  Keeps the first replica's images only: summing image buffers across
  replicas would be meaningless.
  """

  def __init__(self, class_names, image_shape, max_images=16,
               name='misclassified'):
    super().__init__(name=name)
    self._class_names = tuple(class_names)
    self._max_images = max_images

    def weight(name, shape, dtype):
      return self.add_weight(
          name, shape=shape, dtype=dtype, initializer='zeros',
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    self._images = weight('images', (max_images, *image_shape), tf.float32)
    self._labels = weight('labels', (max_images,), tf.int64)
    self._predictions = weight('predictions', (max_images,), tf.int64)
    self._count = weight('count', (), tf.int64)

  def update_state(self, images, labels, predictions, sample_weight):
    wrong = tf.where(tf.logical_and(tf.not_equal(labels, predictions),
                                    sample_weight > 0))[:, 0]
    count = self._count.read_value()
    take = tf.minimum(tf.size(wrong, tf.int64), self._max_images - count)
    wrong = wrong[:take]

    def append(buffer, values):
      new = tf.gather(values, wrong)
      kept = buffer.read_value()
      buffer.assign(tf.concat([kept[:count], new, kept[count + take:]],
                              axis=0))

    append(self._images, images)
    append(self._labels, labels)
    append(self._predictions, predictions)
    self._count.assign_add(take)

  def result(self):
    return tf.py_function(
        functools.partial(_misclassified_summary, self.name,
                          self._class_names),
        [self._images, self._labels, self._predictions, self._count],
        tf.string)


# Module functions, not closures over the metric: tf.py_function runs them
# eagerly, and autograph need not convert them.
def _confusion_summary(tag, class_names, matrix):
  return _image_summary(tag, render_confusion_matrix(matrix.numpy(),
                                                     class_names))


def _misclassified_summary(tag, class_names, images, labels, predictions,
                           count):
  count = int(count)
  return _image_summary(tag, render_misclassified(
      images.numpy()[:count], labels.numpy()[:count],
      predictions.numpy()[:count], class_names))


# The whole run's training examples per second, written at its last step
# (examples_per_second is of the last interval alone).
RUN_RATE = 'run_examples_per_second'
