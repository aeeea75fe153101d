"""Fixtures for the delivery loop: a tenant with its own WhatsApp number, a customer conversation with
an inbound message, the real WhatsApp channel against the Graph sandbox on loopback, real Postgres and
Redis. Only Meta's Graph API is a stand-in (the project's sandbox)."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from arq.connections import ArqRedis, RedisSettings, create_pool
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.base import ChannelDeps, OutboundPart
from switchboard.channels.whatsapp import sandbox_router
from switchboard.channels.whatsapp.channel import CAPABILITIES, WhatsAppChannel
from switchboard.crypto import CredentialCipher
from switchboard.db.models import (
    ChannelAccount,
    Conversation,
    Customer,
    HumanAgent,
    Message,
    Outbox,
    OutboxPurpose,
    Tenant,
    utcnow,
)
from switchboard.handoff import add_agent
from switchboard.outbox import OutboxItem, write_outbox
from switchboard.outbox.delivery import DeliveryDeps
from switchboard.settings import Settings, load_settings
from switchboard.tenants import add_channel_account

from tests.channels.whatsapp.conftest import APP_SECRET, VERIFY_TOKEN
from tests.utils.handoff import random_phone
from tests.utils.servers import serve_app


@pytest.fixture(scope="session")
def sandbox() -> Iterator[tuple[str, Any]]:
    """The project's Graph API sandbox on a loopback port: ``(base_url, GraphSandbox state)``."""
    app = FastAPI()
    router = sandbox_router()
    app.include_router(router)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    with serve_app(app) as url:
        yield url + "/_sandbox/graph", router.sandbox  # type: ignore[attr-defined]


@pytest.fixture
def make_settings(
    database_url: str, redis_url: str, data_dir: Path, sandbox: tuple[str, Any]
) -> Callable[..., Settings]:
    """Settings for one test: real DB/Redis, the sandbox Graph API, short provider timeouts."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = dict(
            database_url=database_url, redis_url=redis_url, data_dir=data_dir / "state", log_format="console",
            meta_app_secret=APP_SECRET, meta_verify_token=VERIFY_TOKEN, whatsapp_graph_base_url=sandbox[0],
            whatsapp_send_timeout_s=2.0, inbound_debounce_s=0.0, orchestrator_port=1,
            whatsapp_sandbox_enabled=False, _env_file=None,
        )  # fmt: skip
        values.update(overrides)
        return load_settings(**values)

    return make


@pytest.fixture
async def arq_redis(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    yield pool
    await pool.aclose()


class NoEchoWhatsApp(WhatsAppChannel):
    """The WhatsApp adapter declared without correlation echo (a channel whose provider never echoes
    our id back): what the loop does for such channels, against the same sandbox."""

    capabilities = replace(CAPABILITIES, correlation_echo=False)


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


@dataclass
class Scene:
    """A tenant with a WhatsApp number, one customer conversation and the customer's latest message."""

    tenant: Tenant
    account: ChannelAccount
    customer: Customer
    conversation: Conversation
    inbound: Message

    @property
    def phone_number_id(self) -> str:
        return self.account.external_account_id


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
        phone_number_id = str(random.randint(10**14, 10**15 - 1))
        wa_id = random_phone()
        last = utcnow() - last_message_age
        async with sessions() as session, session.begin():
            account = await add_channel_account(
                session, tenant=tenant, channel="whatsapp", external_account_id=phone_number_id,
                credentials={"access_token": "EAAG-test-token"},
                cipher=CredentialCipher(settings.secret("encryption_key").encode()),
            )  # fmt: skip
            customer = Customer(
                tenant_id=tenant.id,
                channel="whatsapp",
                external_user_id=wa_id,
                phone=wa_id,
                display_name="Ana",
            )
            session.add(customer)
            await session.flush()
            conversation = Conversation(
                tenant_id=tenant.id, customer_id=customer.id, channel="whatsapp",
                channel_account_id=account.id, last_customer_message_at=last,
            )  # fmt: skip
            session.add(conversation)
            await session.flush()
            inbound = Message(
                tenant_id=tenant.id, conversation_id=conversation.id, channel="whatsapp",
                channel_account_id=account.id, direction="inbound", role="user", text="hello?",
                external_id=f"wamid.IN{uuid.uuid4().hex}", sender_external_id=wa_id, sent_at=last,
                raw={}, inbound_state="done",  # answered: never picked up by the inbound sweeper
            )  # fmt: skip
            session.add(inbound)
        return Scene(
            tenant=tenant, account=account, customer=customer, conversation=conversation, inbound=inbound
        )

    return make


async def write_parts(
    sessions: async_sessionmaker[AsyncSession],
    scene: Scene,
    texts: list[str],
    *,
    purpose: OutboxPurpose = OutboxPurpose.reply,
    keyed: bool = True,
) -> list[Outbox]:
    """Write ``texts`` as parts for the customer with the real outbox writer; returns the rows in order."""
    items = [
        OutboxItem(
            conversation_id=scene.conversation.id,
            channel="whatsapp",
            channel_account_id=scene.account.id,
            recipient=scene.customer.phone or "",
            part=OutboundPart(text=text),
            purpose=purpose,
        )  # fmt: skip
        for text in texts
    ]
    async with sessions() as session, session.begin():
        await write_outbox(
            session, tenant_id=scene.tenant.id, items=items,
            inbound_message_id=scene.inbound.id if keyed else None, trace_id=f"trace-{uuid.uuid4().hex[:12]}",
        )  # fmt: skip
    return await rows_of(sessions, scene)


async def write_agent_notice(
    sessions: async_sessionmaker[AsyncSession], scene: Scene, agent: HumanAgent, text: str
) -> Outbox:
    """A notice to ``agent`` about the scene's conversation (audience agent, no inbound message)."""
    item = OutboxItem(
        conversation_id=scene.conversation.id, channel="whatsapp", channel_account_id=scene.account.id,
        recipient=agent.phone, part=OutboundPart(text=text), purpose=OutboxPurpose.notice,
        audience="agent", agent_id=agent.id,
    )  # fmt: skip
    async with sessions() as session, session.begin():
        await write_outbox(session, tenant_id=scene.tenant.id, items=[item], trace_id="trace-agent")
    (row,) = [r for r in await rows_of(sessions, scene) if r.recipient == agent.phone]
    return row


async def make_human_agent(
    sessions: async_sessionmaker[AsyncSession], scene: Scene, *, last_inbound_age: timedelta | None
) -> HumanAgent:
    async with sessions() as session, session.begin():
        agent = await add_agent(
            session, tenant_id=scene.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        agent.last_inbound_at = utcnow() - last_inbound_age if last_inbound_age is not None else None
    return agent


async def rows_of(sessions: async_sessionmaker[AsyncSession], scene: Scene) -> list[Outbox]:
    """The outbox rows sent from the scene's number, oldest first, then by purpose and part."""
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Outbox)
                    .where(Outbox.tenant_id == scene.tenant.id, Outbox.channel_account_id == scene.account.id)
                    .order_by(col(Outbox.created_at), col(Outbox.purpose), col(Outbox.part_index))
                )
            ).all()
        )


async def set_row(sessions: async_sessionmaker[AsyncSession], row_id: uuid.UUID, **values: Any) -> None:
    """Move a row's clock (``next_attempt_at`` / ``sending_at`` into the past) instead of sleeping."""
    async with sessions() as session, session.begin():
        await session.execute(update(Outbox).where(col(Outbox.id) == row_id).values(**values))


async def script(base_url: str, **spec: Any) -> None:
    """Queue a scripted answer in the sandbox (``POST /_control/failures``)."""
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{base_url}/_control/failures", json=spec)
        response.raise_for_status()


async def sent_by(base_url: str, phone_number_id: str) -> list[dict[str, Any]]:
    """What the sandbox recorded for one business number (``GET /_control/sent?phone_number_id=``)."""
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{base_url}/_control/sent", params={"phone_number_id": phone_number_id})
        response.raise_for_status()
        return response.json()["messages"]


@contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Log events as dicts, with the bound context variables merged in (what a JSON line carries)."""
    capture = structlog.testing.LogCapture()
    previous = structlog.get_config()
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    try:
        yield capture.entries
    finally:
        structlog.configure(**previous)


def past(seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=seconds)
