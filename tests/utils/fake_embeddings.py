"""A loopback OpenAI-compatible ``POST /v1/embeddings`` server for tests (served by ``serve_app``).

Vectors are the lexical embedding of each input, so retrieval behaves realistically. The server
can fail chosen requests (HTTP 500, as a provider outage does) to test retries and atomicity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from switchboard.llm.lexical import lexical_embedding

from tests.utils.servers import serve_app


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
    """Run ``provider`` on a loopback port (:func:`tests.utils.servers.serve_app`) for the block."""
    async with serve_app(provider.app()) as url:
        provider.base_url = f"{url}/v1"
        yield provider
