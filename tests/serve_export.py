"""Helper of test_stacks: the serving_default logits of a SavedModel on the
first 100 MNIST test images. Imported on this stack; run as a script on the
other one:

    python serve_export.py IDX_DIR EXPORT_DIR [EXPORT_DIR ...]

prints the TensorFlow version, then each export's logits as a JSON line.
"""

import json
import sys

# Before TensorFlow: on 2.16+ the package makes tf.keras tf-keras.
from estimator_trainer import sources
import tensorflow as tf  # pylint: disable=g-import-not-at-top


def logits(idx_dir, export_dir):
  images = next(iter(sources.IdxSource('mnist', str(idx_dir)).dataset(
      sources.TEST).batch(100)))[0]
  serve = tf.saved_model.load(str(export_dir)).signatures['serving_default']
  return serve(image=tf.cast(images, tf.float32) / 255.0)['logits'].numpy()


if __name__ == '__main__':
  print(tf.__version__)
  for path in sys.argv[2:]:
    print(json.dumps(logits(sys.argv[1], path).tolist()))
