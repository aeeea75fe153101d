"""The ARQ job queues: queue names, job keys and ids, enqueueing, leases, depth, and how a job runs.

The workers that run the jobs are assembled in :mod:`switchboard.worker`, above the domains.
Names are imported on first use (PEP 562): channel modules import :mod:`switchboard.queue.keys`.
"""

from __future__ import annotations

from switchboard.lazy_imports import lazy_getattr

_EXPORTS = {
    "JOB_QUEUES": "jobs",
    "Queue": "queues",
    "health_check_key": "queues",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
