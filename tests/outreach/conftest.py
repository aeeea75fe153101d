"""A tenant with its own WhatsApp number whose templates were listed from the Graph sandbox, and the
delivery loop with the real WhatsApp channel against that sandbox (real Postgres and Redis)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from switchboard.channels.base import ChannelDeps
from switchboard.channels.whatsapp.channel import WhatsAppChannel
from switchboard.channels.whatsapp.send import GraphClient
from switchboard.channels.whatsapp.templates import refresh_templates
from switchboard.crypto import CredentialCipher
from switchboard.outbox.delivery import DeliveryDeps

from tests.utils.whatsapp import ACCESS_TOKEN
from tests.utils.whatsapp_fixtures import WaTenant, wa_tenant

__all__ = ["deliveries", "templated", "wa_tenant"]


@pytest.fixture
async def templated(wa_tenant: WaTenant, sessions: Any, graph_sandbox: tuple[str, Any]) -> WaTenant:
    """``wa_tenant`` with the sandbox's sample templates stored (``order_update`` in en_US and es...)."""
    graph = GraphClient(graph_sandbox[0], "v23.0")
    async with sessions() as session:
        await refresh_templates(
            session,
            account=wa_tenant.account,
            waba_id=str(random.randint(10**14, 10**15 - 1)),
            graph=graph,
            token=ACCESS_TOKEN,
        )
        await session.commit()
    await graph.aclose()
    return wa_tenant


@pytest.fixture
async def deliveries(
    make_settings: Callable[..., Any], sessions: Any, arq_pool: Any
) -> AsyncIterator[DeliveryDeps]:
    """:class:`DeliveryDeps` of the real WhatsApp channel (the session's Graph sandbox)."""
    settings = make_settings()
    http = httpx.AsyncClient()
    channel = WhatsAppChannel(
        ChannelDeps(
            settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode()), http=http
        )
    )
    yield DeliveryDeps(sessions=sessions, redis=arq_pool, channels={"whatsapp": channel}, settings=settings)
    await channel.aclose()
    await http.aclose()
