"""Running the real ARQ worker in tests."""

from __future__ import annotations

from arq.worker import Worker
from switchboard.queue import build_worker_settings
from switchboard.settings import Settings

__all__ = ["run_worker_burst"]


async def run_worker_burst(settings: Settings, *, max_jobs: int | None = None) -> Worker:
    """Run the real worker settings in burst mode until the queue is empty (cron jobs left out)."""
    cls = build_worker_settings(settings)
    kwargs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    kwargs.pop("cron_jobs", None)
    if max_jobs is not None:
        kwargs["max_jobs"] = max_jobs
    worker = Worker(**kwargs, burst=True, poll_delay=0.01, handle_signals=False)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker
