"""Run a real ARQ worker (chat or background) in burst mode: it processes what is queued, then stops."""

from __future__ import annotations

from arq.worker import Worker
from switchboard.queue import WORKER_SETTINGS_BUILDERS, Queue
from switchboard.settings import Settings


async def run_worker_burst(
    settings: Settings, queue: Queue = Queue.chat, *, max_jobs: int | None = None, poll_delay_s: float = 0.01
) -> Worker:
    """The worker of ``queue`` with its real settings until its queue is empty (cron jobs left out)."""
    cls = WORKER_SETTINGS_BUILDERS[queue](settings)
    kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    kwargs.pop("cron_jobs", None)
    if max_jobs is not None:
        kwargs["max_jobs"] = max_jobs
    worker = Worker(**kwargs, burst=True, poll_delay=poll_delay_s, handle_signals=False)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker
