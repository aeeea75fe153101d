"""The ARQ job queue: worker settings and job functions."""

from switchboard.queue.worker import build_worker_settings, worker_is_healthy

__all__ = ["build_worker_settings", "worker_is_healthy"]
