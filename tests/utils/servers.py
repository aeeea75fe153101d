"""Loopback HTTP servers for tests: any ASGI app under uvicorn in a background thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from tests.utils.net import free_port


@contextmanager
def serve_app(app, *, host: str = "127.0.0.1", health_path: str = "/healthz") -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Run ``app`` on a free loopback port until the block ends; yields ``http://host:port``."""
    port = free_port(host)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://{host}:{port}"
    deadline = time.monotonic() + 20  # generous: services import slowly on a loaded 2-core machine
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + health_path, timeout=0.5).status_code < 500:
                break
        except httpx.HTTPError:
            time.sleep(0.02)
    else:
        raise RuntimeError(f"test server on {url} did not start")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=5)
