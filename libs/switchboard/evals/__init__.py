"""The evaluation harness (``switchboard eval``, docs/agent.md#evaluate-a-change): tasks through the real turn path on a copy of
a tenant, next to a fixed-pipeline baseline, with a report per category and JSONL traces.

* :mod:`.tasks`: the task file format, categories and automatic checks; :data:`DEMO_TASKS_PATH` is
  the demo tenant's task set.
* :mod:`.copy`: the tenant copy the runs use (nothing reaches a customer).
* :mod:`.pipeline`: the baseline (one intent call, then retrieve-then-answer / lookup-then-summarize).
* :mod:`.runner`: :func:`run_eval`, the report and :func:`format_report`.
"""

from switchboard.evals.runner import EvalReport, format_report, run_eval
from switchboard.evals.tasks import CATEGORIES, DEMO_TASKS_PATH, EvalTask, TasksRejected, load_tasks

__all__ = [
    "CATEGORIES",
    "DEMO_TASKS_PATH",
    "EvalReport",
    "EvalTask",
    "TasksRejected",
    "format_report",
    "load_tasks",
    "run_eval",
]
