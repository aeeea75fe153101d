"""The website chat in tests: a widget of a tenant, the web service app, and reading a visitor's stream."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.web.widgets import create_widget
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.settings import Settings
from switchboard.tenant_settings import set_section

__all__ = ["ORIGIN", "WebStreams", "connect_web", "new_visitor", "web_service"]

ORIGIN = "https://shop.example.test"
"""The business's website every test widget allows."""


def new_visitor() -> str:
    """A visitor id as the widget makes them (18 random bytes, URL-safe base64)."""
    return secrets.token_urlsafe(18)


async def connect_web(
    sessions: async_sessionmaker[AsyncSession],
    tenant: Tenant,
    settings: Settings,
    *,
    origins: tuple[str, ...] = (ORIGIN,),
) -> tuple[ChannelAccount, str]:
    """A new widget of ``tenant`` allowed on ``origins``: ``(account, secret)``."""
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        assert row is not None
        set_section(row, "web", allowed_origins=list(origins))
        session.add(row)
        account, secret = await create_widget(
            session, tenant=row, cipher=CredentialCipher.from_settings(settings)
        )
    return account, secret


@asynccontextmanager
async def web_service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The web service app of ``settings`` with its lifespan running, behind an httpx client."""
    from services.web.main import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://web.test") as client:
            yield client


class WebStreams:
    """Reads the replies the web channel "sent": the ``reply`` events of a widget's streams."""

    def __init__(self, database_url: str) -> None:
        self._dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")

    async def replies(self, key: str) -> list[dict[str, Any]]:
        conn = await asyncpg.connect(self._dsn)
        try:
            rows = await conn.fetch(
                "SELECT e.address, e.payload, e.external_id FROM web_chat_events e "
                "JOIN channel_accounts a ON a.id = e.channel_account_id "
                "WHERE a.external_account_id = $1 AND e.kind = 'reply' ORDER BY e.id",
                key,
            )
        finally:
            await conn.close()
        import json

        return [
            {"to": r["address"], "text": json.loads(r["payload"]).get("text", ""), "id": r["external_id"]}
            for r in rows
        ]

    def sent_by(self, key: str) -> list[dict[str, Any]]:
        """:meth:`replies` from synchronous code that runs inside an event loop (the conformance kit)."""
        result: list[list[dict[str, Any]]] = []
        thread = threading.Thread(target=lambda: result.append(asyncio.run(self.replies(key))))
        thread.start()
        thread.join()
        return result[0]


def sample_site(web_url: str, key: str, *, lang: str = "en", user_id: str = "", user_hash: str = "") -> Any:
    """A business's web page with the widget's one script tag (``lang`` on ``<html>``; a signed-in user's
    id and hash when given), as an ASGI app."""
    from html import escape

    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    user = f' data-user-id="{escape(user_id)}" data-user-hash="{escape(user_hash)}"' if user_id else ""
    html = (
        f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>Shop</title></head>'
        f"<body><h1>Shop</h1>"
        f'<script src="{web_url}/widget.js" data-key="{key}"{user} async></script></body></html>'
    )
    app = FastAPI()

    @app.get("/")
    async def home() -> HTMLResponse:
        return HTMLResponse(html)

    return app
