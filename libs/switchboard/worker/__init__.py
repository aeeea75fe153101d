"""The ARQ workers, assembled above every domain package (:mod:`switchboard.worker.assembly`).

Names are imported on first use (PEP 562): importing the package does not pull in the agent and the
channels.
"""

from __future__ import annotations

from switchboard.lazy_imports import lazy_getattr

_EXPORTS = {
    "WORKER_SETTINGS_BUILDERS": "assembly",
    "build_background_worker_settings": "assembly",
    "build_chat_worker_settings": "assembly",
    "worker_is_healthy": "assembly",
    "worker_main": "assembly",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
