"""Warm-ups: slow loads a service runs in a thread once it is up, instead of before ``/healthz``.

The orchestrator's warm-ups are LiteLLM (:func:`switchboard.llm.start_litellm_import`, ~4 s of CPU)
and the MCP client SDK (:func:`switchboard.tools.mcp_client.start_mcp_import`, ~1 s), each imported
by :func:`start_import` in a thread of its own.
While it runs, ``/healthz`` answers 200 ``status: "warming"`` (``switchboard run`` and ``status``
count the service as up), and :class:`switchboard.service_app.ServiceApp` holds every other request
until it is done, off the event loop, answering 503 ``{"detail": "warming"}`` with ``Retry-After``
when it cannot wait; the worker's turn client retries that answer without counting an attempt.
Import-light on purpose: the supervisor and the CLI read :data:`WARMING` too.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["WARMING", "WarmUp", "start_import", "warm_up_state"]

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


_started: dict[str, concurrent.futures.Future[Any]] = {}
_started_lock = threading.Lock()


def _run_into(future: concurrent.futures.Future[Any], load: Callable[[], Any]) -> None:
    # RUNNING first: a waiter's cancelled asyncio future (``asyncio.wrap_future`` chains cancellation)
    # cannot cancel the process's one import
    future.set_running_or_notify_cancel()
    try:
        future.set_result(load())
    except BaseException as exc:  # ImportError and friends: every waiter (and /healthz) sees it
        future.set_exception(exc)


def start_import(name: str, load: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """Run ``load`` (an import) in a daemon thread ``<name>-import``, once per process and ``name``.

    Returns the future of its result (its exception when it failed); later calls with the same name
    return the same future, cheap once done. Code on an event loop must not import the same modules
    itself before the future is done: it would wait on Python's import lock and hold up the loop.
    """
    with _started_lock:
        future = _started.get(name)
        if future is None:
            future = _started[name] = concurrent.futures.Future()
            threading.Thread(
                target=_run_into, args=(future, load), name=f"{name}-import", daemon=True
            ).start()
        return future
