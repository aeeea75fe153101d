"""What the channel conformance suite needs from each channel: how to connect an account, build and sign
a real-shaped webhook, and read what the provider's sandbox received. One kit per registered channel
(the suite fails for a registered channel without one)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.meta import sign_body
from switchboard.db.models import Tenant
from switchboard.settings import Settings

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
    webhook_carries_messages: bool
    """Whether the channel's webhook body carries the messages (Meta). Gmail's push carries none (it
    only moves the mailbox sync): the webhook-shaped tests below are skipped for it, and its own
    equivalents live in ``tests/channels/gmail/test_sync.py`` (duplicate sync, bad push token, unknown
    mailbox, a re-run job, our own reply)."""

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

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        """The headers a correctly signed delivery carries."""
        ...

    def bad_signature(self) -> dict[str, str]:
        """Headers of a delivery signed with the wrong secret."""
        ...

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        """``[{"to", "text", "id"}]`` the provider sandbox received from ``account_id``, in order."""
        ...

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        """The channel's own service app (lifespan running) behind an httpx client."""
        yield  # type: ignore[misc]


class WhatsAppKit:
    name = "whatsapp"
    webhook_path = "/webhooks/whatsapp"
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

    def status(self, account_id: str, external_id: str, status: str) -> dict[str, Any]:
        return self._envelope(
            account_id,
            {"statuses": [{"id": external_id, "status": status, "timestamp": str(int(time.time())),
                           "recipient_id": "15550100099"}]},
        )  # fmt: skip

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        return {"X-Hub-Signature-256": sign_body(raw, settings.secret("meta_app_secret"))}

    def bad_signature(self) -> dict[str, str]:
        return {"X-Hub-Signature-256": sign_body(b"something else", "wrong-secret")}

    def sent(self, sandbox: Any, account_id: str) -> list[dict[str, Any]]:
        return [{"to": m["to"], "text": m["text"], "id": m["id"]} for m in sent_to(sandbox, account_id)]

    @asynccontextmanager
    async def service(self, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
        async with channel_service(settings) as service:
            yield service.client


class GmailKit:
    """Gmail: a mailbox connected through the sandbox's OAuth; mail arrives through the sandbox and a sync."""

    name = "gmail"
    webhook_path = "/webhooks/gmail"
    webhook_carries_messages = False

    async def connect(
        self, sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
    ) -> str:
        from tests.utils.gmail import connect_gmail

        return (await connect_gmail(sessions, tenant, settings)).email

    def sign(self, raw: bytes, settings: Settings) -> dict[str, str]:
        return {}  # the push secret travels in the URL (``?token=``), not in a header

    def bad_signature(self) -> dict[str, str]:
        return {"Authorization": "Bearer not-a-google-token"}


KITS: dict[str, ChannelKit] = {"whatsapp": WhatsAppKit(), "gmail": GmailKit()}  # type: ignore[dict-item]


def new_id(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:20].upper()}"


def raw(body: dict[str, Any]) -> bytes:
    return encode(body)
