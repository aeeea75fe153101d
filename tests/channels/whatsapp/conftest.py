"""Fixtures for the WhatsApp channel: a tenant with its own number, the service app, a burst worker."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.whatsapp import sign_body
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Message, Outbox, Tenant
from switchboard.settings import Settings
from switchboard.tenants import add_channel_account

from services.whatsapp.main import create_app
from tests.utils.agent import llm_settings
from tests.utils.whatsapp import encode
from tests.utils.worker import run_worker_burst  # noqa: F401  (re-exported for the tests here)

APP_SECRET = "test-app-secret"
VERIFY_TOKEN = "test-verify-token"


@dataclass
class WaTenant:
    tenant: Tenant
    account: ChannelAccount
    phone_number_id: str


@pytest.fixture
async def wa_tenant(
    make_tenant: Callable[..., Awaitable[Tenant]],
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
) -> WaTenant:
    """A fresh tenant with a WhatsApp number of its own (random ``phone_number_id``)."""
    tenant = await make_tenant()
    phone_number_id = str(random.randint(10**14, 10**15 - 1))
    async with sessions() as session, session.begin():
        account = await add_channel_account(
            session, tenant=tenant, channel="whatsapp", external_account_id=phone_number_id,
            credentials={"access_token": "EAAG-test-token"}, cipher=CredentialCipher(settings.resolved_encryption_key()),
        )  # fmt: skip
    return WaTenant(tenant=tenant, account=account, phone_number_id=phone_number_id)


class ChannelClient:
    """Posts signed webhooks to the real WhatsApp service app (lifespan running)."""

    def __init__(self, client: httpx.AsyncClient, app: FastAPI) -> None:
        self.client = client
        self.app = app

    async def post(
        self, body: dict[str, Any] | bytes, *, signature: str | None = "valid", secret: str = APP_SECRET
    ) -> httpx.Response:
        raw = body if isinstance(body, bytes) else encode(body)
        headers = {"Content-Type": "application/json"}
        if signature == "valid":
            headers["X-Hub-Signature-256"] = sign_body(raw, secret)
        elif signature is not None:
            headers["X-Hub-Signature-256"] = signature
        return await self.client.post("/webhooks/whatsapp", content=raw, headers=headers)


@asynccontextmanager
async def channel_service(settings: Settings) -> AsyncIterator[ChannelClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://whatsapp.test") as client:
            yield ChannelClient(client, app)


@pytest.fixture
def open_channel() -> Callable[[Settings], Any]:
    return channel_service


async def messages_of(sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID) -> list[Message]:
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Message).where(Message.tenant_id == tenant_id).order_by(Message.created_at)
                )
            ).all()
        )  # type: ignore[arg-type]


async def outbox_of(sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID) -> list[Outbox]:
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Outbox).where(Outbox.tenant_id == tenant_id).order_by(Outbox.part_index)
                )
            ).all()
        )  # type: ignore[arg-type]


def sent_to(sandbox: Any, phone_number_id: str) -> list[dict[str, Any]]:
    """What the Graph sandbox recorded for one business number."""
    return [m for m in sandbox.sent if m["phone_number_id"] == phone_number_id]


@pytest.fixture
async def ai_tenant(wa_tenant, model, sessions):  # type: ignore[no-untyped-def]
    """``wa_tenant`` whose agent answers through the scripted deployment."""
    from switchboard.db.models import Tenant

    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, wa_tenant.tenant.id)
        tenant.settings_extensions = {**tenant.settings_extensions, "llm": llm_settings(model[2])}
        session.add(tenant)
    return wa_tenant
