"""The ARQ job queues: the chat and background queues, their workers and job functions."""

from switchboard.queue.queues import JOB_QUEUES, Queue, health_check_key
from switchboard.queue.worker import (
    WORKER_SETTINGS_BUILDERS,
    build_background_worker_settings,
    build_chat_worker_settings,
    worker_is_healthy,
    worker_main,
)

__all__ = [
    "JOB_QUEUES",
    "Queue",
    "WORKER_SETTINGS_BUILDERS",
    "build_background_worker_settings",
    "build_chat_worker_settings",
    "health_check_key",
    "worker_is_healthy",
    "worker_main",
]
