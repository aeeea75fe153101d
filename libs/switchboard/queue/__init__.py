"""The ARQ job queues: the chat and background queues, their workers and job functions.

Names are imported on first use (PEP 562): channel modules import :mod:`switchboard.queue.keys`
and must not pull in the workers (and through them the agent and the channels) at import time.
"""

from __future__ import annotations

from switchboard.lazy_imports import lazy_getattr

_EXPORTS = {
    "JOB_QUEUES": "queues",
    "Queue": "queues",
    "health_check_key": "queues",
    "WORKER_SETTINGS_BUILDERS": "worker",
    "build_background_worker_settings": "worker",
    "build_chat_worker_settings": "worker",
    "worker_is_healthy": "worker",
    "worker_main": "worker",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
