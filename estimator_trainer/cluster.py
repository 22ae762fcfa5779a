"""TF_CONFIG: parsed and checked before anything starts.

The cluster runtime is TensorFlow's own: each process of a job gets the same
`cluster` and its own `task` in the TF_CONFIG environment variable, as
Kubeflow's TFJob, Vertex AI or scripts/local_cluster.py set it.
"""

import contextlib
import dataclasses
import json
import os
from typing import Dict, List, Optional

from estimator_trainer import layout
from estimator_trainer.errors import UsageError

CHIEF, WORKER, PS, EVALUATOR = 'chief', 'worker', 'ps', 'evaluator'
TASK_TYPES = (CHIEF, WORKER, PS, EVALUATOR)
# Strategies that run inside one process, on its own devices.
LOCAL_STRATEGIES = ('default', 'one_device', 'mirrored')


@dataclasses.dataclass(frozen=True)
class Cluster:
  """The training cluster (evaluator excluded) and this process's task."""

  jobs: Dict[str, List[str]]
  task_type: str
  task_index: int
  has_evaluator: bool
  # Whether TF_CONFIG's `cluster` lists the evaluator: TensorFlow's own
  # train_and_evaluate documentation gives the evaluator only its task.
  evaluator_listed: bool = True

  @property
  def is_chief(self):
    """The chief, or worker 0 when the cluster has no chief."""
    if CHIEF in self.jobs:
      return self.task_type == CHIEF
    return self.task_type == WORKER and self.task_index == 0

  @property
  def trainer_index(self):
    """This task's place among the trainers (the chief 0, then the
    workers), None for others."""
    if self.task_type == CHIEF:
      return 0
    if self.task_type == WORKER:
      return self.task_index + (CHIEF in self.jobs)
    return None

  @property
  def num_trainers(self):
    return len(self.jobs.get(CHIEF, [])) + len(self.jobs.get(WORKER, []))

  def scratch_dir(self, model_dir):
    """This task's scratch dir: not a run for TensorBoard, and removed
    after training."""
    return layout.scratch_dir(model_dir, self.task_type, self.task_index)

  def tf_config(self):
    """TF_CONFIG as TensorFlow should see it.

    The evaluator is not part of the training cluster (tensorflow#27857,
    kubeflow/trainer#1139): it is left out of `cluster` whatever the launcher
    wrote.
    """
    return json.dumps({'cluster': self.jobs,
                       'task': {'type': self.task_type,
                                'index': self.task_index}})


def _fail(message):
  raise UsageError(f'TF_CONFIG: {message}')


def parse(text: Optional[str]) -> Optional[Cluster]:
  """The Cluster of a TF_CONFIG value; None when unset or without cluster."""
  if not text or not text.strip():
    return None
  try:
    tf_config = json.loads(text)
  except json.JSONDecodeError as e:
    _fail(f'not valid JSON ({e})')
  if not isinstance(tf_config, dict):
    _fail('must be a JSON object with "cluster" and "task"')
  cluster = tf_config.get('cluster')
  if not cluster:
    return None  # As TensorFlow: no cluster means local training.
  if not isinstance(cluster, dict):
    _fail('"cluster" must map task types to lists of "host:port"')
  for job, addresses in cluster.items():
    if job not in TASK_TYPES:
      _fail(f'unknown task type {job!r} in "cluster"; use '
            f'{", ".join(TASK_TYPES)}')
    if (not isinstance(addresses, list) or not addresses or
        not all(isinstance(a, str) and ':' in a for a in addresses)):
      _fail(f'"cluster"."{job}" must be a non-empty list of "host:port"')
  if len(cluster.get(CHIEF, [])) > 1:
    _fail('a cluster has at most one chief')
  if len(cluster.get(EVALUATOR, [])) > 1:
    _fail('a cluster has at most one evaluator')

  task = tf_config.get('task')
  if not isinstance(task, dict) or 'type' not in task:
    _fail('missing "task": {"type": ..., "index": ...}')
  task_type, index = task['type'], task.get('index', 0)
  if task_type not in TASK_TYPES:
    _fail(f'unknown task type {task_type!r}; use {", ".join(TASK_TYPES)}')
  if not isinstance(index, int) or isinstance(index, bool) or index < 0:
    _fail(f'task index must be an integer >= 0, got {index!r}')
  if task_type == EVALUATOR:
    if index != 0:
      _fail('there is one evaluator, with index 0')
  elif index >= len(cluster.get(task_type, [])):
    _fail(f'task {task_type}:{index} is not in the cluster '
          f'({len(cluster.get(task_type, []))} {task_type} task(s))')

  jobs = {job: list(addresses) for job, addresses in cluster.items()
          if job != EVALUATOR}
  result = Cluster(jobs, task_type, index,
                   has_evaluator=EVALUATOR in cluster or task_type == EVALUATOR,
                   evaluator_listed=EVALUATOR in cluster)
  if not result.num_trainers:
    _fail('the cluster has no chief or worker')
  return result


def from_environment() -> Optional[Cluster]:
  return parse(os.environ.get('TF_CONFIG'))


@contextlib.contextmanager
def tf_config_environment(cluster: Optional[Cluster]):
  """TF_CONFIG as TensorFlow is to see it while the block runs: `cluster`'s
  (`Cluster.tf_config`), or unset when `cluster` is None (a task evaluating
  on its own). Restored afterwards. The one place TF_CONFIG is written."""
  saved = os.environ.get('TF_CONFIG')
  if cluster is None:
    os.environ.pop('TF_CONFIG', None)
  else:
    os.environ['TF_CONFIG'] = cluster.tf_config()
  try:
    yield
  finally:
    if saved is None:
      os.environ.pop('TF_CONFIG', None)
    else:
      os.environ['TF_CONFIG'] = saved


def check_strategy(cluster: Optional[Cluster], strategy: str,
                   eval_strategy: str):
  """Fails when the strategies do not fit the cluster."""
  if cluster is None:
    return
  has_ps = PS in cluster.jobs
  if strategy == 'multi_worker_mirrored' and has_ps:
    _fail('"ps" tasks do not fit --strategy=multi_worker_mirrored; use '
          '--strategy=parameter_server')
  if strategy == 'parameter_server' and not (has_ps and CHIEF in cluster.jobs):
    _fail('--strategy=parameter_server needs "ps" and "chief" tasks')
  if strategy in LOCAL_STRATEGIES and (cluster.num_trainers > 1 or has_ps):
    _fail(f'a cluster of {cluster.num_trainers} training task(s) needs '
          '--strategy=multi_worker_mirrored or parameter_server, not '
          f'{strategy}')
  if eval_strategy not in LOCAL_STRATEGIES:
    _fail(f'--eval_strategy={eval_strategy}: evaluation runs on one task; '
          f'use {", ".join(LOCAL_STRATEGIES)}')
