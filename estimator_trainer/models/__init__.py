"""Model builders: the seeds' CNN, the CIFAR ResNet-20, or the user's.

A builder is called as `builder(input_shape, num_classes, **model_kwargs)`
and returns an uncompiled `tf.keras.Model` mapping a float32 image batch in
[0, 1] to float32 logits `[batch, num_classes]`. `--model` names one:
`cnn`, `resnet20` or `MODULE:FUNCTION` (imported by path). The package also
passes `seed` and `sync_batch_norm` to a builder whose signature names them.

On structured data (tabular/) a builder is called as `builder(inputs,
logits_dimension, **model_kwargs)`, `inputs` the encoded columns' mapping of
name -> EncodedInput (kind 'dense' of `width` floats, or 'ids' below
`cardinality`), and maps a dict of those tensors to float32 logits
`[batch, logits_dimension]`: `linear`, `dnn` and `wide_deep` (tabular.py)
or yours. In load.py, `model_input` is what the data gives a builder
first: the image shape, or that mapping.

The package, one module a job over one of shared pieces:

    layers.py    batch norm's constants, per-layer seeded initializers
    images.py    cnn, resnet20
    tabular.py   linear, dnn, wide_deep (the canned Estimators' counterparts)
    load.py      a builder by name or MODULE:FUNCTION; build, check; a
                 model's input signature
    features.py  an input element's features: the model's inputs, and
                 keyed apart from them the example weights and padding
"""

# The names callers use as `models.X`, whichever module holds them.
from estimator_trainer.models.features import FeatureKeys
from estimator_trainer.models.features import PADDING
from estimator_trainer.models.features import WEIGHT
from estimator_trainer.models.images import cnn
from estimator_trainer.models.images import resnet20
from estimator_trainer.models.layers import BN_EPSILON
from estimator_trainer.models.layers import BN_MOMENTUM
from estimator_trainer.models.load import BUILTIN_NAMES
from estimator_trainer.models.load import IMAGE_BUILTINS
from estimator_trainer.models.load import TABULAR_BUILTINS
from estimator_trainer.models.load import build
from estimator_trainer.models.load import check
from estimator_trainer.models.load import input_signature
from estimator_trainer.models.load import name_of
from estimator_trainer.models.load import resolve
