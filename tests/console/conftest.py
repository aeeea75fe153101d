"""The console service in-process (its lifespan opened) and clients on it."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from services.console.main import create_app


@pytest.fixture
async def console_app(make_settings: Callable[..., Any]) -> AsyncIterator[Any]:
    app = create_app(make_settings())
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def console_client(console_app: Any) -> Callable[..., httpx.AsyncClient]:
    """``async with console_client() as client``: a fresh cookie jar on the console app, from its own
    client address (the login limit counts per IP; tests must not share one)."""

    def make(ip: str | None = None) -> httpx.AsyncClient:
        address = ip or f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=console_app, client=(address, 40000)),
            base_url="http://console.test",
            headers={"Accept": "text/html"},
        )

    return make
