"""A loopback OpenAI-compatible ``POST /v1/embeddings`` server for tests (uvicorn, free port).

Vectors are the lexical embedding of each input, so retrieval behaves realistically. The server
can fail chosen requests (HTTP 500, as a provider outage does) to test retries and atomicity.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from switchboard.llm.lexical import lexical_embedding

from tests.utils.net import free_port


@dataclass
class FakeEmbeddingProvider:
    """State of the fake: which requests fail, and what it received."""

    fail_requests: set[int] = field(default_factory=set)
    """1-based request numbers answered with HTTP 500."""
    fail_from: int | None = None
    """Every request from this 1-based number on is answered with HTTP 500."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            number = len(self.requests) + 1
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            self.requests.append(
                {
                    "model": body["model"],
                    "inputs": inputs,
                    "authorization": request.headers.get("authorization"),
                }
            )
            if number in self.fail_requests or (self.fail_from is not None and number >= self.fail_from):
                return JSONResponse(
                    {"error": {"message": "upstream overloaded", "type": "server_error"}}, status_code=500
                )
            data = [
                {"object": "embedding", "index": i, "embedding": lexical_embedding(text)}
                for i, text in enumerate(inputs)
            ]
            usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
            return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})

        return app


@asynccontextmanager
async def serve_fake_embeddings(provider: FakeEmbeddingProvider) -> AsyncIterator[FakeEmbeddingProvider]:
    """Run ``provider`` on ``127.0.0.1:<free port>`` for the duration of the block."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(provider.app(), host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:  # noqa: ASYNC110 (uvicorn exposes only this flag)
            if task.done():
                task.result()  # raises why the server did not start
            await asyncio.sleep(0.01)
    provider.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield provider
    finally:
        server.should_exit = True
        await task
