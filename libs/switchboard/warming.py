"""Warm-ups: slow loads a service runs in a thread once it is up, instead of before ``/healthz``.

The orchestrator's one warm-up is LiteLLM (:func:`switchboard.llm.start_litellm_import`, ~4 s of CPU).
While it runs, ``/healthz`` answers 200 ``status: "warming"`` (``switchboard run`` and ``status``
count the service as up), and :class:`switchboard.service_app.ServiceApp` holds every other request
until it is done, off the event loop, answering 503 ``{"detail": "warming"}`` with ``Retry-After``
when it cannot wait; the worker's turn client retries that answer without counting an attempt.
Import-light on purpose: the supervisor and the CLI read :data:`WARMING` too.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

__all__ = ["WARMING", "WarmUp", "warm_up_state"]

WARMING = "warming"
"""``/healthz`` ``status`` and check value while a warm-up runs; ``detail`` of the 503 answer."""

WarmUp = Callable[[], "concurrent.futures.Future[Any]"]
"""Starts a slow load in a thread, once per process (later calls return the same future)."""


def warm_up_state(future: concurrent.futures.Future[Any]) -> str:
    """``ok``, ``warming``, or ``error: <Type>: <message>`` (at most 300 characters) of one warm-up."""
    if not future.done():
        return WARMING
    exc = future.exception()
    return "ok" if exc is None else f"error: {type(exc).__name__}: {exc}"[:300]
