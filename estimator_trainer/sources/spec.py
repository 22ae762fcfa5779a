"""What every source's data is: the two split roles and DatasetSpec, the
image shape, classes and class names everything after the source needs."""

import dataclasses
import json
from typing import Tuple

import tensorflow as tf

from estimator_trainer.errors import DataError, UsageError

# The two roles of a split: what training reads, what evaluation and
# prediction read.
TRAIN, TEST = 'train', 'test'
KNOWN_CLASS_NAMES = {
    'fashion_mnist': ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
                      'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'),
    'mnist': tuple(str(digit) for digit in range(10)),
}
# Beside TFRecord files: their image shape, classes and class names.
SPEC_FILE = 'dataset_spec.json'
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049

@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """What everything after the source needs to know about the data: the
  model's input and output sizes, parsing, serving, eval images, HParams."""

  name: str
  image_shape: Tuple[int, int, int]
  num_classes: int
  class_names: Tuple[str, ...] = ()

  def __post_init__(self):
    object.__setattr__(self, 'image_shape',
                       tuple(int(d) for d in self.image_shape))
    if not self.class_names:
      object.__setattr__(self, 'class_names', KNOWN_CLASS_NAMES.get(
          self.name, tuple(str(i) for i in range(self.num_classes))))
    object.__setattr__(self, 'class_names', tuple(self.class_names))
    if len(self.image_shape) != 3 or min(self.image_shape) < 1:
      raise UsageError(f'{self.name}: image shape must be [height, width, '
                       f'channels], got {list(self.image_shape)}')
    if self.num_classes < 2:
      raise UsageError(f'{self.name}: needs >= 2 classes, got '
                       f'{self.num_classes}')
    if len(self.class_names) != self.num_classes:
      raise UsageError(f'{self.name}: {len(self.class_names)} class names for '
                       f'{self.num_classes} classes')

  # Images are classified: no head to choose (heads.ImageClassifierHead).
  head = None

  @property
  def model_input(self):
    """What a builder is given first (models.py): the image shape."""
    return self.image_shape

  def record(self):
    """What model_dir's record of the run keeps of the data."""
    return {'dataset': self.name, 'image_shape': list(self.image_shape),
            'num_classes': self.num_classes}

  def to_json(self):
    return json.dumps({'name': self.name, 'image_shape': self.image_shape,
                       'num_classes': self.num_classes,
                       'class_names': self.class_names}, indent=1)

  @classmethod
  def read(cls, path):
    """The spec in a SPEC_FILE."""
    try:
      with tf.io.gfile.GFile(path) as f:
        values = json.load(f)
      return cls(values['name'], values['image_shape'],
                 values['num_classes'], values.get('class_names', ()))
    except (OSError, tf.errors.OpError, ValueError, KeyError,
            TypeError) as e:
      raise DataError(f'{path}: not a dataset spec ({type(e).__name__}: '
                      f'{e})') from None
