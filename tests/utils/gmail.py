"""Gmail for tests: payload files, a connected mailbox of the test's own (through the sandbox's OAuth),
mail delivered to the sandbox, the Gmail service app behind a client, and what the sandbox sent."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.gmail.client import GmailClient
from switchboard.channels.gmail.mailboxes import ConnectedMailbox, connect_mailbox
from switchboard.channels.gmail.oauth import ClientSecrets, consent_url
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Tenant
from switchboard.settings import Settings

from tests.utils.whatsapp import _payload_root

PAYLOAD_DIR = _payload_root() / "gmail"
SECRETS = ClientSecrets(client_id="1000-sandbox.apps.googleusercontent.com", client_secret="GOCSPX-sandbox")
REDIRECT_URI = "http://127.0.0.1:1/oauth2/callback"


def load_payload(name: str) -> dict[str, Any]:
    return json.loads((PAYLOAD_DIR / name).read_text())


def payload_path(name: str) -> Path:
    return PAYLOAD_DIR / name


def new_mailbox() -> str:
    """A mailbox address no other test uses (the sandbox is the session's)."""
    return f"support-{secrets.token_hex(5)}@example.com"


def new_customer() -> str:
    return f"customer-{secrets.token_hex(4)}@example.net"


async def consent_code(settings: Settings, mailbox: str) -> str:
    """Open the sandbox's consent page for ``mailbox`` and take the code from its redirect."""
    url = consent_url(
        auth_url=settings.resolved_gmail_auth_url,
        client_id=SECRETS.client_id,
        redirect_uri=REDIRECT_URI,
        scopes=settings.gmail_oauth_scopes,
        state="s",
        login_hint=mailbox,
    )
    async with httpx.AsyncClient() as client:
        response = await client.get(url)
    assert response.status_code == 302, response.text
    return parse_qs(urlsplit(response.headers["location"]).query)["code"][0]


async def connect_gmail(
    sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings, mailbox: str | None = None
) -> ConnectedMailbox:
    """Connect a fresh sandbox mailbox to ``tenant`` through the real OAuth code flow."""
    mailbox = mailbox or new_mailbox()
    code = await consent_code(settings, mailbox)
    client = GmailClient(settings.resolved_gmail_api_base_url, settings.resolved_gmail_token_url)
    try:
        return await connect_mailbox(
            sessions=sessions,
            cipher=CredentialCipher(settings.secret("encryption_key").encode()),
            client=client,
            tenant_id=tenant.id,
            secrets=SECRETS,
            code=code,
            redirect_uri=REDIRECT_URI,
        )
    finally:
        await client.aclose()


async def control(settings: Settings, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST (or GET without a body) one sandbox control endpoint."""
    url = settings.resolved_gmail_api_base_url + "/_control/" + path
    async with httpx.AsyncClient(timeout=20.0) as client:
        response = await (client.post(url, json=body) if body is not None else client.get(url))
    response.raise_for_status()
    return response.json()


async def deliver(settings: Settings, mailbox: str, **spec: Any) -> dict[str, Any]:
    """A mail arrives in the sandbox mailbox (``from``, ``subject``, ``text``, ``headers``... or ``payload``)."""
    if "from_" in spec:
        spec["from"] = spec.pop("from_")
    return await control(settings, "deliver", {"to": mailbox, **spec})


async def sent_from(settings: Settings, mailbox: str) -> list[dict[str, Any]]:
    """What the sandbox recorded as sent from ``mailbox``, in order."""
    url = settings.resolved_gmail_api_base_url + f"/_control/sent?mailbox={mailbox}"
    async with httpx.AsyncClient() as client:
        return (await client.get(url)).json()["messages"]


@asynccontextmanager
async def gmail_service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The Gmail service app of ``settings`` (lifespan running) behind an httpx client."""
    from services.gmail.main import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gmail.test"
        ) as client:
            yield client


async def run_sync(settings: Settings, account_id: Any) -> None:
    """One sync of the mailbox on the real background worker, then the chat worker (the turns it enqueued)."""
    from switchboard.channels.gmail.jobs import enqueue_sync
    from switchboard.queue import Queue
    from switchboard.runtime.resources import open_resources

    from tests.utils.workers import run_worker_burst

    async with open_resources(settings) as resources:
        await enqueue_sync(resources.redis, account_id, reason="test")
    await run_worker_burst(settings, Queue.background)
    await run_worker_burst(settings)
