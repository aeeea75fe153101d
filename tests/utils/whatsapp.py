"""WhatsApp for tests: real payloads from ``fixtures/payloads/whatsapp`` (load, retarget, refresh, sign), a
connected number of the test's own, the service app behind a client, and what the Graph sandbox received."""

from __future__ import annotations

import copy
import json
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.channels.meta import sign_body
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.settings import Settings
from switchboard.tenants import add_channel_account

APP_SECRET = "test-app-secret"
"""``META_APP_SECRET`` of the channel tests' settings (``make_settings``)."""
VERIFY_TOKEN = "test-verify-token"
"""``META_VERIFY_TOKEN`` of the channel tests' settings."""
ACCESS_TOKEN = "EAAG-test-token"


def _payload_root() -> Path:
    """``SWITCHBOARD_PAYLOADS``, else the project's own copy in ``tests/fixtures/payloads`` (real
    provider payloads, with the shapes of pywa's and netflie's webhook fixtures; INDEX.md names each
    one's outcome)."""
    if os.environ.get("SWITCHBOARD_PAYLOADS"):
        return Path(os.environ["SWITCHBOARD_PAYLOADS"])
    return Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "payloads"


PAYLOAD_DIR = _payload_root() / "whatsapp"


def payload_path(name: str) -> Path:
    return PAYLOAD_DIR / name


def load_payload(
    name: str, *, phone_number_id: str | None = None, refresh: bool = True, shift_s: int = 0
) -> dict[str, Any]:
    """The parsed payload ``name`` (``text.json``...).

    Args:
        phone_number_id: rewrite every ``metadata.phone_number_id`` to this test's account.
        refresh: move every message/status timestamp to now (keeping their relative order).
        shift_s: extra seconds added to refreshed timestamps (negative = in the past).
    """
    body = json.loads(payload_path(name).read_text())
    return retarget(body, phone_number_id=phone_number_id, refresh=refresh, shift_s=shift_s)


def retarget(
    body: dict[str, Any], *, phone_number_id: str | None, refresh: bool = True, shift_s: int = 0
) -> dict[str, Any]:
    body = copy.deepcopy(body)
    stamps = []
    for entry in body.get("entry", []):
        for change in entry.get("changes", []):
            value = change.get("value", {})
            if phone_number_id:
                value.setdefault("metadata", {})["phone_number_id"] = phone_number_id
            for key in ("messages", "statuses", "message_echoes"):
                stamps += [item for item in value.get(key, []) if "timestamp" in item]
    if refresh and stamps:
        newest = max(int(item["timestamp"]) for item in stamps)
        now = int(time.time()) + shift_s
        for item in stamps:
            item["timestamp"] = str(now - (newest - int(item["timestamp"])))
    return body


def text_body(
    *,
    phone_number_id: str,
    wamid: str,
    text: str,
    wa_id: str = "15550100099",
    name: str = "Test Customer",
    bsuid: str | None = None,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """A minimal real-shaped text delivery (shape of ``text.json``)."""
    contact: dict[str, Any] = {"profile": {"name": name}, "wa_id": wa_id}
    message: dict[str, Any] = {
        "from": wa_id,
        "id": wamid,
        "timestamp": str(timestamp or int(time.time())),
        "type": "text",
        "text": {"body": text},
    }
    if bsuid:
        contact["user_id"] = bsuid
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102000000000001",
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550100001",
                                "phone_number_id": phone_number_id,
                            },
                            "contacts": [contact],
                            "messages": [message],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


def encode(body: dict[str, Any]) -> bytes:
    """Bytes as Meta sends them (escaped non-ASCII, compact separators)."""
    return json.dumps(body, separators=(",", ":")).encode()


def new_phone_number_id() -> str:
    """A 15-digit WhatsApp ``phone_number_id`` no other test uses (``secrets``: pytest-randomly reseeds
    ``random`` identically before every test)."""
    return str(10**14 + secrets.randbelow(9 * 10**14))


def new_media_id() -> str:
    """A Graph media id of this test's own (the sandbox's media store is shared by the session)."""
    return str(10**15 + secrets.randbelow(9 * 10**15))


def with_media_id(body: dict[str, Any], media_id: str) -> dict[str, Any]:
    """``body`` with the media id of its (single) media message replaced by ``media_id``."""
    body = copy.deepcopy(body)
    for entry in body["entry"]:
        for change in entry["changes"]:
            for message in change["value"].get("messages", []):
                media = message.get(message.get("type", ""))
                if isinstance(media, dict) and "id" in media:
                    media["id"] = media_id
    return body


async def connect_whatsapp(
    sessions: async_sessionmaker[AsyncSession], tenant: Tenant, settings: Settings
) -> ChannelAccount:
    """Connect a fresh number (:func:`new_phone_number_id`) to ``tenant``; its token is :data:`ACCESS_TOKEN`."""
    async with sessions() as session, session.begin():
        return await add_channel_account(
            session,
            tenant=tenant,
            channel="whatsapp",
            external_account_id=new_phone_number_id(),
            credentials={"access_token": ACCESS_TOKEN},
            cipher=CredentialCipher(settings.secret("encryption_key").encode()),
        )


class ChannelClient:
    """Posts signed webhooks to the real WhatsApp service app (lifespan running)."""

    def __init__(self, client: httpx.AsyncClient, app: Any) -> None:
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
    """The WhatsApp service app of ``settings`` with its lifespan running, behind a :class:`ChannelClient`."""
    from services.whatsapp.main import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://whatsapp.test") as client:
            yield ChannelClient(client, app)


def sent_to(sandbox: Any, phone_number_id: str) -> list[dict[str, Any]]:
    """What the Graph sandbox recorded as sent from one business number, in order."""
    return sandbox.sent_by(phone_number_id)
