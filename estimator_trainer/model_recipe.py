"""The kwargs structured data's recipe gives the built-in deep models (issue
72): a new `dnn` or `wide_deep` run embeds its numbers periodically
(`numeric_embedding`, models/numeric_embedding.py), which the real tables
chose (docs/guide/tabular-measurements.md). The builders' own default
stays without it: canned's DNN, which migrate carries and the Python API's
builders make.

A model_dir's checkpoints are of the model its record (model.json) names:
a run there, or warm-started from there, takes the record's setting, and a
record without it is of a model without the embedding (every run before
this default; canned models carried over). Imports no TensorFlow."""

import dataclasses

from estimator_trainer import layout

MODELS = ('dnn', 'wide_deep')
KEY = 'numeric_embedding'


def _recorded(path):
  """The model_kwargs in the record of model_dir `path` (or of a
  checkpoint prefix's model_dir); {} without a record."""
  record = layout.read_model_file(layout.source_model_dir(path)) or {}
  return record.get('model_kwargs') or {}


def completed(model, kwargs, recorded_kwargs):
  """`kwargs` of `model` with the recipe's setting of a model_dir whose
  record holds `recorded_kwargs` (without it: no embedding) where they do
  not give it: what a run there builds (run_record checks a given
  --model_kwargs by it)."""
  if model not in MODELS or KEY in (kwargs or {}):
    return kwargs
  return {**(kwargs or {}), KEY: (recorded_kwargs or {}).get(KEY, False)}


def resolved(config, source=None):
  """`config` with the recipe's kwargs filled in where its --model_kwargs do
  not give them: as model_dir `source` (default: config's model_dir once it
  holds a checkpoint, else its --warm_start_from) records them; a new
  model's, the recipe's."""
  if source is None:
    source = (config.model_dir if layout.has_checkpoint(config.model_dir)
              else config.warm_start_from)
  kwargs = completed(config.model, config.model_kwargs,
                     _recorded(source) if source else {KEY: True})
  if kwargs is config.model_kwargs:
    return config
  return dataclasses.replace(config, model_kwargs=kwargs)
