"""Serve an ASGI app with uvicorn on a loopback port inside the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

from tests.utils.net import free_port

START_TIMEOUT_S = 10.0


@asynccontextmanager
async def serve_asgi(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """Run ``app`` on ``127.0.0.1:port`` (a free port by default); yields ``http://127.0.0.1:port``."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
    while not server.started and not task.done() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    if not server.started:
        server.should_exit = True
        await asyncio.wait_for(task, START_TIMEOUT_S)
        raise RuntimeError(f"uvicorn did not start on port {port}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, START_TIMEOUT_S)
