"""Heads: what a model's logits mean. A head owns the per-example loss, the
training and evaluation metrics, the predictions and the export outputs,
as canned Estimators' heads do (tensorflow_estimator's head/*.py), under
their names; every engine asks the head.

The loss scaling stays in losses.py: each replica sums its examples' weighted
losses and divides by the global batch (canned heads' SUM_OVER_BATCH_SIZE).

The package: base.py (Head, what every head has), classifiers.py
(multiclass, the image classifiers', binary, multilabel), regression.py;
here the head of a run's data (`of_data`) or of a kind (`make`).
"""

from estimator_trainer import config_checks
from estimator_trainer import config_resolved
from estimator_trainer.heads.classifiers import BinaryHead
from estimator_trainer.heads.classifiers import ImageClassifierHead
from estimator_trainer.heads.classifiers import MulticlassHead
from estimator_trainer.heads.classifiers import MultilabelHead
from estimator_trainer.heads.regression import RegressionHead

KINDS = config_checks.HEADS


def of_data(spec, kind=None, label_smoothing=None, huber_delta=None,
            image_summaries=False):
  """The head of data of `spec` (an image DatasetSpec, or tabular data's:
  its `head`, unless `kind` says otherwise), with `label_smoothing` if given
  (else config_resolved.label_smoothing_of's); `image_summaries`: images'
  evaluation draws them."""
  label_smoothing = config_resolved.label_smoothing_of(label_smoothing,
                                                       images=not spec.head)
  if not spec.head:
    return ImageClassifierHead(spec.class_names, label_smoothing,
                               spec.model_input if image_summaries else None)
  return make(kind or spec.head, spec.class_names, label_smoothing,
              huber_delta, getattr(spec, 'label_scale', None))


def make(kind, class_names=(), label_smoothing=0.0, huber_delta=None,
         label_scale=None):
  """The head of `kind` (one of KINDS) for data of `class_names`;
  `label_scale`: a regression's (see RegressionHead)."""
  if kind == 'multiclass':
    return MulticlassHead(class_names, label_smoothing)
  if kind == 'binary':
    return BinaryHead(class_names or ('0', '1'))
  if kind == 'multilabel':
    return MultilabelHead(class_names)
  if kind == 'regression':
    return RegressionHead(huber_delta, label_scale)
  raise ValueError(f'head must be one of {", ".join(KINDS)}; got {kind!r}')
