"""The one loopback server launcher of the suite: any ASGI app under uvicorn in a background thread.

``with serve_app(app) as url:`` in sync code and fixtures; ``async with serve_app(app) as url:`` in
async tests (start-up and shutdown then wait off the event loop, so clients in the test's loop keep
running). The app runs in its own thread and event loop, as a separate service process would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType
from typing import Any

import httpx
import uvicorn

from tests.utils.net import free_port

START_TIMEOUT_S = 20.0
"""How long a server may take to answer its first request (services import slowly on a loaded 2-core machine)."""
STOP_TIMEOUT_S = 5.0
"""How long shutting a server down may take (uvicorn's graceful shutdown is capped at 1 s)."""


class serve_app:  # noqa: N801 (used like a function: ``with serve_app(app) as url``)
    """Run ``app`` on ``host:port`` (a free port by default) until the block ends; yields ``http://host:port``.

    Ready once ``health_path`` answers below 500 (an app without that route answers 404: ready too).

    Raises:
        RuntimeError: the server did not answer within :data:`START_TIMEOUT_S`.
    """

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int | None = None, health_path: str = "/healthz"
    ) -> None:
        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        self._health_url = self.url + health_path
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", access_log=False, timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def _start(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self._thread.is_alive():
            try:
                if httpx.get(self._health_url, timeout=0.5).status_code < 500:
                    return self.url
            except httpx.HTTPError:
                time.sleep(0.02)
        self._stop()
        raise RuntimeError(f"test server on {self.url} did not start")

    def _stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> str:
        return self._start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    async def __aenter__(self) -> str:
        return await asyncio.to_thread(self._start)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self._stop)


def serve_orchestrator(settings: Any) -> serve_app:
    """The real orchestrator service (``services.orchestrator.main``) of ``settings`` on its
    ``orchestrator_port``, so ``settings.orchestrator_url`` (what the worker calls) reaches it."""
    from services.orchestrator.main import create_app

    return serve_app(create_app(settings), port=settings.orchestrator_port)
