"""When a training loop stops, writes and times, the same in every engine
(the estimator engine's TrainLoopHook, the TF2 engines' Controller): runs of
steps end on checkpoint, summary and log steps and on the last step;
summaries come every `save_summary_steps` and at the last step, step rates
every `log_step_count_steps`, timed from the end of the first run (which
traces or optimizes the graph) and over training alone: checkpoint saves,
evaluations and exports between runs are left out (Timer.exclude)."""


def steps_to_next_stop(config, step, max_steps, steps_per_loop):
  """The next run's steps from `step`: at most `steps_per_loop`, ending on
  the next checkpoint, summary or log step or on the last step."""
  return min([steps_per_loop, max_steps - step] + [
      every - step % every for every in (config.save_checkpoints_steps,
                                         config.save_summary_steps,
                                         config.log_step_count_steps)])


def crossed(before, after, every):
  """Whether a run from step `before` to `after` passed a multiple of
  `every`."""
  return after // every > before // every


def summary_due(config, before, after, max_steps):
  return (crossed(before, after, config.save_summary_steps) or
          after >= max_steps)


def log_due(config, before, after):
  return crossed(before, after, config.log_step_count_steps)


class Timer:
  """(steps, seconds) since a summary or log step was last passed, and
  since the start: seconds of training, without those `exclude`d."""

  def __init__(self):
    # {'summary', 'log', 'start': (step, time, excluded seconds then)}
    self._marks = None
    self._excluded = 0.0

  @property
  def started(self):
    return self._marks is not None

  def start(self, step, now):
    """At the end of the first run: rates are timed from here."""
    self._marks = dict.fromkeys(('summary', 'log', 'start'),
                                (step, now, self._excluded))

  def exclude(self, seconds):
    """Leaves out `seconds` that were not training (a checkpoint save, an
    evaluation)."""
    self._excluded += seconds

  def since(self, mark, step, now):
    """(steps, seconds) since `mark` was last passed; passes it now
    ('start' is never passed: the whole run's)."""
    last_step, last_time, last_excluded = self._marks[mark]
    if mark != 'start':
      self._marks[mark] = (step, now, self._excluded)
    return step - last_step, max(
        now - last_time - (self._excluded - last_excluded), 1e-9)
