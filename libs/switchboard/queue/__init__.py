"""The ARQ job queue: worker settings and job functions."""

from switchboard.queue.worker import build_worker_settings

__all__ = ["build_worker_settings"]
