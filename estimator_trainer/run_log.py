"""The line every engine's job logs first: what the run does, resolved."""

import logging

from estimator_trainer import config_checks
from estimator_trainer import models
from estimator_trainer import sources

_logger = logging.getLogger(__name__)


def log_config(config, source, num_replicas, global_batch_size, max_steps,
               training):
  """Logs `config.describe`'s line for a job on `source`; only the job of
  the run's own mode does (train_and_evaluate's evaluation job is another
  one: the line is logged once)."""
  if training != (config.mode in config_checks.TRAINING_MODES):
    return
  _logger.info('Config: %s', config.describe(
      models.name_of(config.model), str(source), num_replicas,
      global_batch_size, max_steps,
      source.num_examples(sources.TRAIN) if training else None))
