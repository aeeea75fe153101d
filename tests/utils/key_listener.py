"""A recording listener on loopback: a stand-in for a server a tenant points a model, embedding,
transcription or vision call at. It answers like an OpenAI-compatible (and Anthropic) API and records
the credential headers of every request, so a test can prove which key reached it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.utils.servers import serve_app

CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")
"""Headers a provider SDK carries a key in (OpenAI, Anthropic, Azure)."""
EMBEDDING_WIDTH = 1536
"""Floats per vector: the width of the knowledge base's pgvector column."""


@dataclass
class Seen:
    """One request the listener received."""

    method: str
    path: str
    credentials: dict[str, str]
    """The credential headers it carried (:data:`CREDENTIAL_HEADERS`), lower-case names."""


@dataclass
class KeyListener:
    """What the listener saw; ``url`` is its root (``http://127.0.0.1:PORT``)."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)

    def credentials(self) -> list[str]:
        """Every credential header value received, in order."""
        return [value for item in self.seen for value in item.credentials.values()]

    def carried(self, secret: str) -> bool:
        """Whether any request carried ``secret`` in any credential header."""
        return any(secret in value for value in self.credentials())


def _app(listener: KeyListener) -> FastAPI:
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT"])
    async def anything(path: str, request: Request) -> JSONResponse:
        credentials = {name: request.headers[name] for name in CREDENTIAL_HEADERS if name in request.headers}
        listener.seen.append(Seen(request.method, "/" + path, credentials))
        if path.endswith("embeddings"):
            body = await request.json()
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            data = [
                {"object": "embedding", "index": n, "embedding": [0.5] + [0.0] * (EMBEDDING_WIDTH - 1)}
                for n, _ in enumerate(texts)
            ]
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model"),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            )
        if path.endswith("audio/transcriptions"):
            return JSONResponse({"text": "listener transcription"})
        if path.endswith("messages"):  # Anthropic
            return JSONResponse(
                {
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "type": "message",
                    "role": "assistant",
                    "model": "listener",
                    "content": [{"type": "text", "text": "Listener answer."}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 3, "output_tokens": 2},
                }
            )
        if path.endswith("chat/completions"):
            body = await request.json()
            return JSONResponse(
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "listener"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "Listener answer."},
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                }
            )
        return JSONResponse({})

    return app


@asynccontextmanager
async def key_listener() -> AsyncIterator[KeyListener]:
    """``async with key_listener() as listener``: a fresh listener for one test."""
    listener = KeyListener()
    async with serve_app(_app(listener)) as url:
        listener.url = url
        yield listener
