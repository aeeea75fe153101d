"""Instagram for tests: real payloads from ``tests/fixtures/payloads/instagram`` (load, retarget, refresh), a
connected account of the test's own, and what the Instagram Graph sandbox received."""

from __future__ import annotations

import copy
import json
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

from tests.utils.whatsapp import _payload_root

IG_APP_SECRET = "test-instagram-app-secret"
"""``INSTAGRAM_APP_SECRET`` of the channel tests' settings (differs from the WhatsApp app's on purpose)."""
IG_ACCESS_TOKEN = "IGAA-test-token"
PAYLOAD_DIR = _payload_root() / "instagram"
PAYLOAD_ACCOUNT = "17841400000000001"
PAYLOAD_CUSTOMER = "1000000000000001"


def mid(n: int) -> str:
    """The payloads' ``mid#N`` (INDEX.md: the opaque mid ending in the encoded counter N)."""
    return _MIDS[n]


_MIDS = {
    n: "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOaWdfaXRlbToxOklHTWVzc2FnZToxNzg0MTQwMDAwMDAwMDAwMTozNDAyODIzNjY4NDE3MTAzMDAwMDAwMDAwMDAwMDAwMDAw"
    + tail
    for n, tail in {
        1: "MDEZD",
        2: "MDIZD",
        3: "MDMZD",
        4: "MDQZD",
        5: "MDUZD",
        6: "MDYZD",
        8: "MDgZD",
        9: "MDkZD",
        12: "MTIZD",
    }.items()
}


def payload_path(name: str) -> Path:
    return PAYLOAD_DIR / name


def load_payload(
    name: str,
    *,
    account_id: str | None = None,
    customer: str | None = None,
    refresh: bool = True,
    shift_s: int = 0,
    mids: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The parsed payload ``name`` (``text_dm.json``...).

    Args:
        account_id: rewrite the professional account id (entry id, and sender/recipient where it is
            the business) to this test's account.
        customer: rewrite the customer's IGSID.
        refresh: move every timestamp to now (milliseconds), keeping their relative order.
        shift_s: seconds added to refreshed timestamps (negative: in the past).
        mids: replace mids (old → new), so a test has ids of its own.
    """
    text = (PAYLOAD_DIR / name).read_text()
    for old, new in (mids or {}).items():
        text = text.replace(old, new)
    body = json.loads(text)
    now_ms = int((time.time() + shift_s) * 1000)
    for entry in body.get("entry", []):
        if account_id and entry.get("id") == PAYLOAD_ACCOUNT:
            entry["id"] = account_id
        if refresh:
            entry["time"] = now_ms
        for key in ("messaging", "standby"):
            for item in entry.get(key, []):
                for side in ("sender", "recipient"):
                    party = item.get(side) or {}
                    if account_id and party.get("id") == PAYLOAD_ACCOUNT:
                        party["id"] = account_id
                    elif customer and party.get("id") == PAYLOAD_CUSTOMER:
                        party["id"] = customer
                if refresh:
                    item["timestamp"] = now_ms
    return copy.deepcopy(body)


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def signed(body: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """``(raw, headers)`` of a delivery signed with the Instagram app's secret of the tests."""
    raw = encode(body)
    return raw, {"Content-Type": "application/json", "X-Hub-Signature-256": sign_body(raw, IG_APP_SECRET)}


def new_account_id() -> str:
    """A fresh professional account id (17841 + 12 digits), unique per test."""
    return "17841" + str(secrets.randbelow(10**12)).zfill(12)


def new_igsid() -> str:
    return "1" + str(secrets.randbelow(10**15)).zfill(15)


async def connect_instagram(
    sessions: async_sessionmaker[AsyncSession],
    tenant: Tenant,
    settings: Settings,
    account_id: str | None = None,
    api_base_url: str | None = None,
) -> ChannelAccount:
    """A new Instagram account of ``tenant`` with an encrypted access token; ``api_base_url`` as stored
    (``None``: the process default, ``INSTAGRAM_GRAPH_BASE_URL``; ``"sandbox"``: the service's own)."""
    async with sessions() as session, session.begin():
        return await add_channel_account(
            session,
            tenant=tenant,
            channel="instagram",
            external_account_id=account_id or new_account_id(),
            credentials={"access_token": IG_ACCESS_TOKEN},
            cipher=CredentialCipher(settings.secret("encryption_key").encode()),
            api_base_url=api_base_url,
        )


@asynccontextmanager
async def instagram_service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The Instagram service app of ``settings`` with its lifespan running, behind an httpx client."""
    from services.instagram.main import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://instagram.test") as client:
            yield client
