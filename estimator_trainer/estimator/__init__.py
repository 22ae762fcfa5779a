"""The Estimator engine, by job:

    graph.py          make_model_fn (any builder) and model_fn (the CNN): the
                      TRAIN, EVAL and PREDICT graphs
    params.py         model_fn's params (ModelParams), model_params of a run
    job.py            RunConfig factory; Estimator, data, hooks, exporters
    modes.py          train_and_evaluate (every cluster role), train,
                      evaluate, predict, export
    cluster_roles.py  parameter servers and the evaluator
    tfx.py            TFX's trainer_fn
"""

from estimator_trainer import stack

stack.require_estimator('the estimator engine')

# pylint: disable=g-import-not-at-top
from estimator_trainer.estimator.graph import make_model_fn
from estimator_trainer.estimator.graph import model_fn
from estimator_trainer.estimator.job import make_run_config
from estimator_trainer.estimator.modes import evaluate
from estimator_trainer.estimator.modes import export
from estimator_trainer.estimator.modes import predict
from estimator_trainer.estimator.modes import train
from estimator_trainer.estimator.modes import train_and_evaluate
from estimator_trainer.estimator.params import model_params
from estimator_trainer.estimator.tfx import trainer_fn
