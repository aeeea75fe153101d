"""Run an ASGI app under uvicorn on a free loopback port in a background thread (tests only)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from tests.utils.net import free_port


@contextmanager
def run_app(app, *, probe_path: str = "/healthz", port: int | None = None) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Serve ``app`` on 127.0.0.1 until the block ends; yields its base URL."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + probe_path, timeout=0.5).status_code < 500:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:
        raise RuntimeError(f"loopback server on {url} did not start")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
