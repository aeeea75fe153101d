"""The console service in-process (it serves ``/api/v1``) and tenant API keys for it."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from switchboard.db.models import Message, MessageDirection, MessageRole, Role, Tenant
from switchboard.media.store import MediaStore
from switchboard.privacy.export import export_key, new_export_id
from switchboard.users import API_SCOPES, create_tenant_key

from services.console.main import create_app
from tests.utils.console import new_user
from tests.utils.handoff import random_phone
from tests.utils.outbox import new_scene
from tests.utils.whatsapp import connect_whatsapp


@pytest.fixture
async def api_app(make_settings: Callable[..., Any]) -> AsyncIterator[Any]:
    app = create_app(make_settings())
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def api(api_app: Any) -> Callable[..., httpx.AsyncClient]:
    """``async with api(key) as client``: a client of the console service sending ``key`` as its bearer."""

    def make(key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api_app), base_url="http://console.test", headers=headers
        )

    return make


MakeKey = Callable[..., Awaitable[str]]


@pytest.fixture
def make_key(sessions: Any) -> MakeKey:
    """``await make_key(tenant, scopes=[...], expires_at=None)``: a new key (all scopes by default)."""

    async def make(
        tenant: Tenant, scopes: list[str] | None = None, expires_at: datetime | None = None
    ) -> str:
        async with sessions() as session, session.begin():
            token, _ = await create_tenant_key(
                session,
                tenant_id=tenant.id,
                scopes=list(API_SCOPES) if scopes is None else scopes,
                name="test",
                expires_at=expires_at,
            )
        return token

    return make


@dataclass
class World:
    """One tenant with a row of every resource the public API names by id, and a key of each scope."""

    tenant: Tenant
    ids: dict[str, str]
    """Path parameter → an id of this tenant: conversation_id, customer_id, document_id, message_id, endpoint_id."""
    user_id: uuid.UUID
    """A tenant admin (a conversation can be assigned to them)."""
    new_phone: str
    """A phone of no customer yet (``startConversation`` writes to it with a template)."""
    customer_identity: str
    """The conversation's customer's phone number (``eraseCustomer``'s confirmation)."""


@pytest.fixture
async def world(
    make_tenant: Any,
    sessions: Any,
    settings: Any,
    make_key: MakeKey,
    api: Any,
    api_app: Any,
    stops_at_the_queue: None,
) -> World:
    """The tenant has a WhatsApp number on the Graph sandbox, its templates listed; the conversation is a
    customer's on it, who wrote 5 minutes ago (inside the 24-hour window: free text and files may go
    out). (Uploads and reindexing queue ingestion jobs no
    worker runs here: the test discards them.)"""
    tenant = await make_tenant("World Shop")
    account = await connect_whatsapp(sessions, tenant, settings)
    scene = await new_scene(sessions, tenant, account, last_message_age=timedelta(minutes=5))
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        message = Message(
            tenant_id=tenant.id,
            conversation_id=scene.conversation.id,
            channel="whatsapp",
            channel_account_id=account.id,
            direction=MessageDirection.outbound.value,
            role=MessageRole.assistant.value,
            text="We open at 9.",
        )
        session.add(message)
    setup = await make_key(tenant, scopes=["knowledge:write", "webhooks:manage", "messages:write"])
    async with api(setup) as client:
        uploaded = await client.post(
            "/api/v1/knowledge/documents",
            files={"file": ("hours.txt", b"We open at 9 and close at 18.", "text/plain")},
        )
        assert uploaded.status_code == 202, uploaded.text
        endpoint = await client.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/hook"})
        assert endpoint.status_code == 201, endpoint.text
        # the sandbox lists its sample templates for any business account; later refreshes reuse this id
        waba_id = str(10**14 + secrets.randbelow(9 * 10**14))
        listed = await client.post("/api/v1/whatsapp/templates/refresh", json={"waba_id": waba_id})
        assert listed.status_code == 200, listed.text
    ids = {
        "conversation_id": str(scene.conversation.id),
        "customer_id": str(scene.customer.id),
        "document_id": uploaded.json()["document"]["id"],
        "message_id": str(message.id),
        "endpoint_id": endpoint.json()["id"],
        "export_id": new_export_id(),
    }
    # an export the background job has written (getCustomerExport downloads it)
    await MediaStore.from_settings(api_app.state.settings).write(
        export_key(tenant.id, ids["export_id"]), b"PK\x05\x06" + b"\x00" * 18
    )
    return World(
        tenant=tenant,
        ids=ids,
        user_id=user.id,
        new_phone=random_phone(),
        customer_identity=str(scene.customer.phone or scene.customer.external_user_id),
    )


ORDER_UPDATE = {
    "name": "order_update",
    "language": "en_US",
    "body": ["Ana", "#1042", "on its way"],
    "buttons": ["1042"],
}
"""An approved template of the Graph sandbox's samples, with the values it takes."""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100
"""A file whose bytes say PNG (what ``sendAttachment`` checks)."""


def request_body(operation_id: str, world: World) -> dict[str, Any]:
    """What each operation is called with (``json=``, ``files=`` or ``params=``) in the route walks."""
    return {
        "assignConversation": {"json": {"to": f"user:{world.user_id}"}},
        "updateCustomer": {"json": {"attributes": {"tier": "gold"}}},
        "uploadDocument": {"files": {"file": ("faq.txt", b"Returns within 30 days.", "text/plain")}},
        "searchKnowledge": {"params": {"q": "open"}},
        "sendFeedback": {"json": {"rating": "up"}},
        "createWebhookEndpoint": {"json": {"url": "http://127.0.0.1:9/other"}},
        "refreshTemplates": {"json": {}},
        "startConversation": {"json": {"phone": "+" + world.new_phone, "template": ORDER_UPDATE}},
        "sendMessage": {"json": {"text": "Your parcel left the warehouse."}},
        "sendAttachment": {
            "files": {"file": ("parcel.png", PNG, "image/png")},
            "data": {"caption": "Your parcel"},
        },
        "rotateWebhookSecret": {"json": {}},
        "addNote": {"json": {"text": "Called them: parcel re-sent."}},
        "eraseCustomer": {"json": {"confirm": world.customer_identity}},
    }.get(operation_id, {})


def fill(path: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, f"no id for {path}"
    return path


@pytest.fixture
async def world_key(make_tenant: Any, make_key: MakeKey) -> str:
    """A key with every scope, of a tenant of its own."""
    return await make_key(await make_tenant("Key Only Shop"))
