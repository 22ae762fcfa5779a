"""The TF2 engines, on the same input_fn, model, loss helpers, evaluation and
model_dir layout as the estimator engine:

    job.py         a run's strategy, data, model, optimizer, checkpoints
    restore.py     a job's model from model_dir's latest checkpoint, or a
                   warm start
    evaluation.py  the whole test set under the strategy; --mode=evaluate
                   and predict
    export.py      SavedModels with the estimator engine's signatures
    preemption.py  SIGTERM: the step saved (by every worker alike)
    cluster_roles.py  tasks that do not train: ps and workers under
                   parameter servers, the evaluator
    controller.py  the outer loop both engines share (checkpoints, throttled
                   evaluation and exports, SIGTERM, non-finite loss,
                   summaries, early stopping)
    train_summaries.py  the summaries, step rates and progress line
                   between steps
    ctl.py         the custom training loop engine (strategy.run)
    keras_fit.py   the Model.fit engine
    migration.py   an Estimator checkpoint carried over
"""
