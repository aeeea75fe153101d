"""The ARQ job queues: the chat and background queues, their workers and job functions.

Names are imported on first use (PEP 562): channel modules import :mod:`switchboard.queue.keys`
and must not pull in the workers (and through them the agent and the channels) at import time.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'switchboard.queue' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"switchboard.queue.{module}"), name)
    globals()[name] = value
    return value
