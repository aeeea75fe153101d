"""What the channel conformance suite needs from each channel: how to connect an account, build and sign
a real-shaped webhook, and read what the provider's sandbox received. One kit per registered channel
(the suite fails for a registered channel without one)."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.meta import sign_body
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.settings import Settings

from tests.utils.instagram import connect_instagram, instagram_service
from tests.utils.web import ORIGIN, connect_web, new_visitor, web_service
from tests.utils.whatsapp import channel_service, connect_whatsapp, encode, sent_to

__all__ = ["ChannelKit", "KITS", "Posted"]


@dataclass(frozen=True)
class Posted:
    """One customer message to put in a delivery."""

    external_id: str
    sender: str
    text: str


class ChannelKit(Protocol):
    name: str
    webhook_path: str
    sandbox_fixture: str
    """The session fixture ``(url, state)`` of the provider's sandbox (``graph_sandbox``...)."""
    webhook_carries_messages: bool
    """Whether the channel's webhook body carries the messages (Meta). Gmail's push carries none (it
    only moves the mailbox sync): the suite parametrizes its webhook-message tests (duplicates, a bad
    item, statuses) only over kits where this is true (``MESSAGE_CHANNELS`` in the suite), and the checks
    of any channel (authentication, unknown account, a re-run job sends once) over every kit; Gmail's
    message-level equivalents live in ``tests/channels/gmail/test_sync.py`` (deduplicated sync, our own
    reply)."""

    async def connect(
        self, sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
    ) -> str:
        """Connect a fresh account to ``tenant``; returns the provider's account id."""
        ...

    def delivery(
        self, account_id: str, messages: list[Posted], *, malformed_at: int | None = None
    ) -> dict[str, Any]:
        """A real-shaped webhook body carrying ``messages``; with ``malformed_at``, a broken item is put
        at that position (no id, wrong types) among them."""
        ...

    def status(self, account_id: str, external_id: str, status: str) -> dict[str, Any]:
        """A delivery-status webhook for one of our sent messages."""
        ...

    def notification(self, account_id: str) -> dict[str, Any]:
        """A real-shaped webhook body for ``account_id`` (a message delivery, or Gmail's push)."""
        ...

    def unknown_account(self) -> str:
        """An account id of the provider's shape that no tenant connected."""
        ...

    def signed_path(self, settings: Settings) -> str:
        """The webhook path a correctly authenticated post goes to (Gmail's push secret is in the URL)."""
        ...

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        """The headers a correctly signed delivery carries."""
        ...

    def wrongly_signed(self, settings: Settings) -> tuple[str, dict[str, str]]:
        """``(path, headers)`` of a delivery signed with the wrong secret."""
        ...

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        """``[{"to", "text", "id"}]`` the provider sandbox received from ``account_id``, in order."""
        ...

    sandbox_fixture: str
    """The pytest fixture of the provider's sandbox: ``(base_url, state)``; ``state`` goes to :meth:`sent`."""

    def new_sender(self) -> str:
        """A customer address of the provider's shape no other test uses."""
        ...

    async def receive(self, settings: Settings, account_id: str, sender: str, text: str) -> None:
        """A customer message reaches the channel the way the provider delivers it and is stored with
        its chat job queued (a signed webhook; Gmail: the mail in the sandbox mailbox and a sync)."""
        ...

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        """The channel's own service app (lifespan running) behind an httpx client."""
        yield  # type: ignore[misc]


async def receive_by_webhook(
    kit: ChannelKit, settings: Settings, account_id: str, sender: str, text: str
) -> None:
    """:meth:`ChannelKit.receive` of a channel whose webhook carries the message: one signed delivery
    through the channel's own service, stored once."""
    body = encode(kit.delivery(account_id, [Posted(new_id("in"), sender, text)]))
    async with kit.service(settings) as client:
        response = await client.post(
            kit.signed_path(settings),
            content=body,
            headers={"Content-Type": "application/json", **kit.sign(body, settings)},
        )
    assert response.status_code == 200 and response.json()["stored"] == 1, response.text


class WhatsAppKit:
    name = "whatsapp"
    webhook_path = "/webhooks/whatsapp"
    sandbox_fixture = "graph_sandbox"
    webhook_carries_messages = True

    async def connect(
        self, sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
    ) -> str:
        return (await connect_whatsapp(sessions, tenant, settings)).external_account_id

    def _envelope(self, account_id: str, value: dict[str, Any]) -> dict[str, Any]:
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100001", "phone_number_id": account_id},
            **value,
        }
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": "102000000000001", "changes": [{"value": value, "field": "messages"}]}],
        }

    def delivery(
        self, account_id: str, messages: list[Posted], *, malformed_at: int | None = None
    ) -> dict[str, Any]:
        now = int(time.time())
        items: list[Any] = [
            {
                "from": m.sender,
                "id": m.external_id,
                "timestamp": str(now),
                "type": "text",
                "text": {"body": m.text},
            }
            for m in messages
        ]
        contacts = [{"profile": {"name": "Conformance"}, "wa_id": m.sender} for m in messages]
        if malformed_at is not None:
            items.insert(malformed_at, {"type": ["not", "a", "type"], "text": 42, "timestamp": "soon"})
        return self._envelope(account_id, {"contacts": contacts, "messages": items})

    def notification(self, account_id: str) -> dict[str, Any]:
        return self.delivery(account_id, [Posted(new_id("note"), "15550100300", "hello")])

    def signed_path(self, settings: Settings) -> str:
        return self.webhook_path

    def unknown_account(self) -> str:
        return str(900_000_000_000_000 + uuid.uuid4().int % 10**14)

    def status(self, account_id: str, external_id: str, status: str) -> dict[str, Any]:
        return self._envelope(
            account_id,
            {
                "statuses": [
                    {
                        "id": external_id,
                        "status": status,
                        "timestamp": str(int(time.time())),
                        "recipient_id": "15550100099",
                    }
                ]
            },
        )

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        return {"X-Hub-Signature-256": sign_body(raw, settings.secret("meta_app_secret"))}

    def wrongly_signed(self, settings: Settings) -> tuple[str, dict[str, str]]:
        return self.webhook_path, {"X-Hub-Signature-256": sign_body(b"something else", "wrong-secret")}

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        return [{"to": m["to"], "text": m["text"], "id": m["id"]} for m in sent_to(sandbox, account_id)]

    def new_sender(self) -> str:
        return "1555" + str(uuid.uuid4().int)[:7]

    async def receive(self, settings: Settings, account_id: str, sender: str, text: str) -> None:
        await receive_by_webhook(self, settings, account_id, sender, text)

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        async with channel_service(settings) as service:
            yield service.client


class InstagramKit:
    """Instagram: ``entry[].messaging[]`` deliveries signed with the Instagram app's own secret. Meta
    reports only ``read`` for Instagram messages (``messaging_seen``), so every status but ``read`` is
    sent as that same read again (a duplicate changes nothing)."""

    name = "instagram"
    webhook_path = "/webhooks/instagram"
    sandbox_fixture = "instagram_sandbox"
    webhook_carries_messages = True

    async def connect(
        self, sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
    ) -> str:
        return (await connect_instagram(sessions, tenant, settings)).external_account_id

    def delivery(
        self, account_id: str, messages: list[Posted], *, malformed_at: int | None = None
    ) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        items: list[Any] = [
            {
                "sender": {"id": m.sender},
                "recipient": {"id": account_id},
                "timestamp": now_ms,
                "message": {"mid": m.external_id, "text": m.text},
            }
            for m in messages
        ]
        if malformed_at is not None:
            items.insert(malformed_at, {"sender": ["x"], "timestamp": "soon", "message": {"text": 42}})
        return {"object": "instagram", "entry": [{"id": account_id, "time": now_ms, "messaging": items}]}

    def status(self, account_id: str, external_id: str, status: str) -> dict[str, Any]:
        now_ms = int(time.time() * 1000)
        return {
            "object": "instagram",
            "entry": [
                {
                    "id": account_id,
                    "time": now_ms,
                    "messaging": [
                        {
                            "sender": {"id": "15550100306"},
                            "recipient": {"id": account_id},
                            "timestamp": now_ms,
                            "read": {"mid": external_id},
                        }
                    ],
                }
            ],
        }

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        return {"X-Hub-Signature-256": sign_body(raw, settings.secret("instagram_app_secret"))}

    def wrongly_signed(self, settings: Settings) -> tuple[str, dict[str, str]]:
        return self.webhook_path, {"X-Hub-Signature-256": sign_body(b"something else", "wrong-secret")}

    def notification(self, account_id: str) -> dict[str, Any]:
        return self.delivery(account_id, [Posted(new_id("note"), self.new_sender(), "hello")])

    def signed_path(self, settings: Settings) -> str:
        return self.webhook_path

    def unknown_account(self) -> str:
        return str(17_800_000_000_000_000 + uuid.uuid4().int % 10**15)

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        return [{"to": m["to"], "text": m["text"], "id": m["id"]} for m in sandbox.sent_by(account_id)]

    def new_sender(self) -> str:
        return "9" + str(uuid.uuid4().int)[:15]  # an IGSID-shaped id

    async def receive(self, settings: Settings, account_id: str, sender: str, text: str) -> None:
        await receive_by_webhook(self, settings, account_id, sender, text)

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        async with instagram_service(settings) as client:
            yield client


class GmailKit:
    """Gmail: a mailbox connected through the sandbox's OAuth; mail arrives through the sandbox and a sync."""

    name = "gmail"
    webhook_path = "/webhooks/gmail"
    webhook_carries_messages = False
    sandbox_fixture = "gmail_sandbox"

    async def connect(
        self, sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
    ) -> str:
        from tests.utils.gmail import connect_gmail

        return (await connect_gmail(sessions, tenant, settings)).email

    def notification(self, account_id: str) -> dict[str, Any]:
        """A Pub/Sub push envelope (the shape of ``payloads/gmail/pubsub_push_envelope.json``)."""
        data = base64.b64encode(json.dumps({"emailAddress": account_id, "historyId": 1}).encode()).decode()
        mid = str(uuid.uuid4().int)[:16]
        return {
            "message": {
                "data": data,
                "messageId": mid,
                "message_id": mid,
                "publishTime": "2026-12-01T10:00:00.000Z",
            },
            "subscription": "projects/switchboard/subscriptions/gmail-push",
        }

    def signed_path(self, settings: Settings) -> str:
        return f"{self.webhook_path}?token={settings.secret('gmail_push_secret')}"

    def unknown_account(self) -> str:
        return f"unknown-{uuid.uuid4().hex[:12]}@example.com"

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        return {}  # the push secret travels in the URL (``?token=``), not in a header

    def wrongly_signed(self, settings: Settings) -> tuple[str, dict[str, str]]:
        return f"{self.webhook_path}?token=not-the-push-secret", {}

    sandbox_fixture = "gmail_sandbox"

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        return [
            {"to": m["to"], "text": m["text"], "id": m["id"]}
            for m in sandbox.sent
            if m["mailbox"] == account_id
        ]

    def new_sender(self) -> str:
        from tests.utils.gmail import new_customer

        return new_customer()

    async def receive(self, settings: Settings, account_id: str, sender: str, text: str) -> None:
        from switchboard.channels.gmail.jobs import enqueue_sync
        from switchboard.queue import Queue
        from switchboard.runtime.resources import open_resources

        from tests.utils.gmail import deliver
        from tests.utils.workers import run_worker_burst

        await deliver(settings, account_id, from_=sender, subject="Conformance", text=text)
        async with open_resources(settings) as resources, resources.sessions() as session:
            account = (
                await session.exec(
                    select(ChannelAccount).where(
                        ChannelAccount.channel == "gmail", ChannelAccount.external_account_id == account_id
                    )
                )
            ).one()
            await enqueue_sync(resources.redis, account.id, reason="conformance")
        await run_worker_burst(settings, Queue.background)

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        from tests.utils.gmail import gmail_service

        async with gmail_service(settings) as client:
            yield client


class WebKit:
    """Website chat: a visitor's POST to the web service, authenticated by the widget key in the body and
    the page's ``Origin`` (missing: 401, another website: 403). "Sent" is what the visitor's stream got.
    The kit's customer addresses are made visitor ids (22+ URL-safe characters) when they are not."""

    name = "web"
    webhook_path = "/web/v1/messages"
    sandbox_fixture = "web_streams"
    webhook_carries_messages = True

    async def connect(
        self, sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
    ) -> str:
        return (await connect_web(sessions, tenant, settings))[0].external_account_id

    def __init__(self) -> None:
        self._senders: dict[str, str] = {}
        """visitor id → the suite's customer address it stands for (``sent`` answers in the suite's terms)"""

    def _visitor(self, sender: str) -> str:
        visitor = sender if len(sender) >= 22 else (sender + "-visitor-of-the-kit")[:22]
        self._senders[visitor] = sender
        return visitor

    def delivery(
        self, account_id: str, messages: list[Posted], *, malformed_at: int | None = None
    ) -> dict[str, Any]:
        items: list[Any] = [{"id": m.external_id, "text": m.text} for m in messages]
        if malformed_at is not None:
            items.insert(malformed_at, {"id": ["not", "an", "id"], "text": 42})
        sender = messages[0].sender if messages else self.new_sender()
        return {"key": account_id, "visitor": self._visitor(sender), "messages": items}

    def status(self, account_id: str, external_id: str, status: str) -> dict[str, Any]:
        return {
            "key": account_id,
            "visitor": self._visitor("15550100306"),
            "statuses": [{"id": external_id, "status": status}],
        }

    def notification(self, account_id: str) -> dict[str, Any]:
        return self.delivery(account_id, [Posted(new_id("note"), self.new_sender(), "hello")])

    def unknown_account(self) -> str:
        return "wk_" + uuid.uuid4().hex[:24]

    def signed_path(self, settings: Settings) -> str:
        return self.webhook_path

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        return {"Origin": ORIGIN}

    def wrongly_signed(self, settings: Settings) -> tuple[str, dict[str, str]]:
        return self.webhook_path, {"Origin": "https://another-site.example.test"}

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        return [{**m, "to": self._senders.get(m["to"], m["to"])} for m in sandbox.sent_by(account_id)]

    def new_sender(self) -> str:
        return new_visitor()

    async def receive(self, settings: Settings, account_id: str, sender: str, text: str) -> None:
        await receive_by_webhook(self, settings, account_id, sender, text)

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        async with web_service(settings) as client:
            yield client


KITS: dict[str, ChannelKit] = {  # type: ignore[dict-item]
    "whatsapp": WhatsAppKit(),
    "instagram": InstagramKit(),
    "gmail": GmailKit(),
    "web": WebKit(),
}


def new_id(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:20].upper()}"


def raw(body: dict[str, Any]) -> bytes:
    return encode(body)
