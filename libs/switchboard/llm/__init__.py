"""The LLM layer: the per-tenant LiteLLM Router, trimming, and the offline model (lexical embedding).

``import litellm`` costs about 4 s and 150 MB, so no module imports it at the top:
:func:`import_litellm` loads it on first use. Processes that never call a model (the channel
services, the worker until its first summary) never pay for it. The orchestrator loads it in a
background thread once it is up (:func:`start_litellm_import`, its ``/healthz`` says ``warming``
meanwhile) and every request that may call a model awaits that thread (:func:`await_litellm`)
without blocking the event loop (``tests/test_import_cost.py``, ``tests/agent/test_warm_up.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import ModuleType

__all__ = ["import_litellm", "start_litellm_import", "await_litellm"]

_loading: concurrent.futures.Future[ModuleType] | None = None
_loading_lock = threading.Lock()


def import_litellm() -> ModuleType:
    """The ``litellm`` module, imported on first call, with its "Give Feedback" banner off and its
    loggers writing through structlog (it adds its own coloured handler at import).

    On an event loop, call it only after :func:`await_litellm` (or where nothing else may be
    importing it): while another thread runs the import, this call waits on Python's import lock and
    holds up the whole loop.
    """
    import litellm

    from switchboard.observability import adopt_library_loggers

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on stdout
    adopt_library_loggers()
    return litellm


def _import_into(future: concurrent.futures.Future[ModuleType]) -> None:
    # RUNNING: a waiter's cancelled asyncio future (``wrap_future`` chains cancellation) cannot
    # cancel the process's one import
    future.set_running_or_notify_cancel()
    try:
        future.set_result(import_litellm())
    except BaseException as exc:  # ImportError and friends: every waiter sees it
        future.set_exception(exc)


def start_litellm_import() -> concurrent.futures.Future[ModuleType]:
    """Start importing LiteLLM in a daemon thread (``litellm-import``), once per process.

    Returns the process's one future of the module: done when the import finished (its exception
    when it failed). Later calls return the same future; cheap when LiteLLM is already loaded.
    """
    global _loading
    with _loading_lock:
        if _loading is None:
            _loading = concurrent.futures.Future()
            threading.Thread(
                target=_import_into, args=(_loading,), name="litellm-import", daemon=True
            ).start()
        return _loading


async def await_litellm(timeout_s: float | None = None) -> ModuleType:
    """The ``litellm`` module once the background import (started here if need be) is done; the
    event loop keeps serving meanwhile.

    Raises:
        TimeoutError: not loaded within ``timeout_s`` (the import goes on).
        ImportError: the import failed (every later call raises it too).
    """
    future = start_litellm_import()
    if future.done():
        return future.result()
    return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout_s)
