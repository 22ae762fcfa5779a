import sys

import setuptools

# Not a Python module: a library preloaded into cluster tasks so that their
# gRPC server listens only on the TF_CONFIG address (estimator_trainer/listen.py).
EXT_MODULES = [
    setuptools.Extension('estimator_trainer._listen_shim',
                         ['estimator_trainer/listen_shim.c'],
                         libraries=['dl']),
] if sys.platform.startswith('linux') else []

setuptools.setup(ext_modules=EXT_MODULES)
