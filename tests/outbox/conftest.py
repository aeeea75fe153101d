"""Fixtures for the delivery loop: a tenant with its own WhatsApp number, a customer conversation with
an inbound message, the real WhatsApp channel against the Graph sandbox on loopback, real Postgres and
Redis. Only Meta's Graph API is a stand-in (the project's sandbox). Helpers: ``tests/utils/outbox.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.base import ChannelDeps
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.crypto import CredentialCipher
from switchboard.db.models import (
    Tenant,
)
from switchboard.outbox.delivery import DeliveryDeps
from switchboard.settings import Settings

from tests.utils.outbox import NoEchoWhatsApp, Scene, new_scene
from tests.utils.whatsapp import connect_whatsapp


@pytest.fixture
def sandbox(graph_sandbox: tuple[str, Any]) -> tuple[str, Any]:
    """The session's Graph API sandbox (``graph_sandbox``): ``(base_url, GraphSandbox state)``."""
    return graph_sandbox


@pytest.fixture
def make_settings(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """The suite's ``make_settings`` with a short Graph send timeout (lost answers are tested here)."""

    def make(**overrides: Any) -> Settings:
        return make_settings(**{"whatsapp_send_timeout_s": 2.0, **overrides})

    return make


@pytest.fixture
def arq_redis(arq_pool: ArqRedis) -> ArqRedis:
    return arq_pool


@pytest.fixture
async def make_deps(
    make_settings: Callable[..., Settings], sessions: async_sessionmaker[AsyncSession], arq_redis: ArqRedis
) -> AsyncIterator[Callable[..., DeliveryDeps]]:
    """``make_deps(**settings_overrides)``: :class:`DeliveryDeps` with the real WhatsApp channel."""
    opened: list[Any] = []

    def make(*, echo: bool = True, **overrides: Any) -> DeliveryDeps:
        settings = make_settings(**overrides)
        http = httpx.AsyncClient()
        channel_deps = ChannelDeps(
            settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode()), http=http
        )
        channel = WhatsAppChannel(channel_deps) if echo else NoEchoWhatsApp(channel_deps)
        opened.extend([channel, http])
        return DeliveryDeps(
            sessions=sessions, redis=arq_redis, channels={"whatsapp": channel}, settings=settings
        )

    yield make
    for item in opened:
        await item.aclose()


@pytest.fixture
def make_scene(
    make_tenant: Callable[..., Awaitable[Tenant]],
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
) -> Callable[..., Awaitable[Scene]]:
    """``await make_scene(last_message_age=timedelta(minutes=5), tenant=None, **tenant_settings)``: a new
    tenant (or ``tenant``, with a second number), a customer and their latest message."""

    async def make(
        *, last_message_age: timedelta = timedelta(minutes=5), tenant: Tenant | None = None, **extensions: Any
    ) -> Scene:
        tenant = tenant or await make_tenant(**extensions)
        account = await connect_whatsapp(sessions, tenant, settings)
        return await new_scene(sessions, tenant, account, last_message_age=last_message_age)

    return make
