"""The public API's outreach routes through HTTP with real tenant API keys: templates listed and
refreshed from the Graph sandbox, a conversation started with a template or refused free text outside
the window (a problem with the rule), a person's buttons, and a webhook secret rotated."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from redis import Redis
from sqlmodel import select
from standardwebhooks import Webhook
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Outbox, WebhookEndpoint
from switchboard.egress import EgressPolicy
from switchboard.events.endpoints import create_endpoint, signing_secrets
from switchboard.outreach.routes import outreach_routers

from tests.public_api.conftest import ORDER_UPDATE as ORDER
from tests.public_api.conftest import PNG
from tests.utils.handoff import random_phone
from tests.utils.whatsapp_fixtures import wa_tenant
from tests.utils.workers import queued_jobs

__all__ = ["wa_tenant"]


@pytest.fixture
def outreach_api(api_app: Any, api: Any, stops_at_the_queue: None) -> Any:
    """``api`` with the outreach routers mounted (once: a service that mounts them already keeps its own)."""
    paths = {getattr(r, "path", "") for r in api_app.router.routes}
    if (
        "/api/v1/conversations/{conversation_id}/messages" not in paths
        or "/api/v1/whatsapp/templates" not in paths
    ):
        for router in outreach_routers():
            api_app.include_router(router)
    return api


async def _refresh(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post(
        "/api/v1/whatsapp/templates/refresh", json={"waba_id": str(random.randint(10**14, 10**15 - 1))}
    )


async def test_templates_are_refreshed_and_listed_with_the_values_they_take(
    outreach_api, make_key, wa_tenant
) -> None:  # type: ignore[no-untyped-def]
    key = await make_key(wa_tenant.tenant, scopes=["messages:write"])
    async with outreach_api(key) as client:
        refreshed = await _refresh(client)
        assert refreshed.status_code == 200, refreshed.text
        assert refreshed.json() == {
            "channel_account_id": str(wa_tenant.account.id),
            "templates": 5,
            "approved": 4,
        }
        first = await client.get("/api/v1/whatsapp/templates", params={"limit": 3})
        rest = await client.get(
            "/api/v1/whatsapp/templates", params={"limit": 3, "cursor": first.json()["next_cursor"]}
        )
    items = first.json()["items"] + rest.json()["items"]
    assert rest.json()["next_cursor"] is None
    assert sorted((t["name"], t["language"]) for t in items) == [
        ("hello_world", "en_US"),
        ("order_update", "en_US"),
        ("order_update", "es"),
        ("shipping_label", "en_US"),
        ("spring_sale", "en_US"),
    ]
    order = next(t for t in items if (t["name"], t["language"]) == ("order_update", "en_US"))
    assert (order["body_values"], order["button_values"], order["body_text"]) == (
        ["1", "2", "3"],
        1,
        "Hi {{1}}, your order {{2}} is {{3}}.",
    )


async def test_start_with_a_template_works_and_free_text_outside_the_window_is_a_problem(
    outreach_api, make_key, wa_tenant, sessions, redis_url
) -> None:  # type: ignore[no-untyped-def]
    key = await make_key(wa_tenant.tenant, scopes=["messages:write"])
    phone = random_phone()
    async with outreach_api(key) as client:
        await _refresh(client)
        refused = await client.post(
            "/api/v1/conversations", json={"phone": "+" + phone, "text": "Your order shipped"}
        )
        started = await client.post("/api/v1/conversations", json={"phone": "+" + phone, "template": ORDER})
        wrong = await client.post(
            "/api/v1/conversations", json={"phone": "+" + phone, "template": {**ORDER, "body": ["Ana"]}}
        )
    assert refused.status_code == 409 and refused.headers["content-type"].startswith(
        "application/problem+json"
    )
    problem = refused.json()
    assert (problem["code"], problem["title"], problem["status"]) == (
        "outside_customer_service_window",
        "Outside the customer-service window",
        409,
    )
    assert "only within 24 hours of the customer's last message" in problem["detail"]
    assert "Send an approved template instead" in problem["detail"]

    assert started.status_code == 202, started.text
    assert [j.startswith("deliver:api:") for j in queued_jobs(Redis.from_url(redis_url), "arq:queue")] == [
        True
    ]
    body = started.json()
    assert (body["via"], body["customer_created"], body["status"]) == ("template", True, "queued")
    assert (wrong.status_code, wrong.json()["code"]) == (422, "template_parameters_invalid")
    assert wrong.json()["detail"] == "template order_update takes 3 body value(s), 1 given"
    async with sessions() as session:
        rows = (await session.exec(select(Outbox).where(Outbox.tenant_id == wa_tenant.tenant.id))).all()
    assert [(r.purpose, r.payload["type"], r.payload["template"]["name"], r.recipient) for r in rows] == [
        ("human_reply", "template", "order_update", phone)
    ]


async def test_send_message_needs_its_scope_and_the_tenant_s_own_conversation(
    outreach_api, make_key, make_tenant, wa_tenant
) -> None:  # type: ignore[no-untyped-def]
    writer = await make_key(wa_tenant.tenant, scopes=["messages:write"])
    reader = await make_key(wa_tenant.tenant, scopes=["conversations:read"])
    other = await make_key(await make_tenant(), scopes=["messages:write"])
    async with outreach_api(writer) as client:
        await _refresh(client)
        started = (
            await client.post("/api/v1/conversations", json={"phone": random_phone(), "template": ORDER})
        ).json()
        buttons = {
            "kind": "buttons",
            "prompt": "Deliver when?",
            "options": [{"id": "am", "title": "Morning"}],
        }
        outside = await client.post(
            f"/api/v1/conversations/{started['conversation_id']}/messages", json={"interactive": buttons}
        )
    assert (outside.status_code, outside.json()["code"]) == (409, "outside_customer_service_window")
    async with outreach_api(reader) as client:
        scoped = await client.post(
            f"/api/v1/conversations/{started['conversation_id']}/messages", json={"template": ORDER}
        )
    async with outreach_api(other) as client:
        foreign = await client.post(
            f"/api/v1/conversations/{started['conversation_id']}/messages", json={"template": ORDER}
        )
    async with outreach_api(None) as client:
        anonymous = await client.post(
            "/api/v1/conversations", json={"phone": random_phone(), "template": ORDER}
        )
    assert (scoped.status_code, scoped.json()["code"]) == (403, "insufficient_scope")
    assert (foreign.status_code, foreign.json()["code"]) == (404, "not_found")
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "unauthorized")


async def test_a_webhook_secret_is_rotated_with_an_overlap(
    outreach_api, make_key, wa_tenant, sessions, settings
) -> None:  # type: ignore[no-untyped-def]
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    async with sessions() as session, session.begin():
        endpoint, old = await create_endpoint(
            session,
            tenant_id=wa_tenant.tenant.id,
            url="https://127.0.0.1/hook",
            event_types=[],
            description="",
            cipher=cipher,
            egress=EgressPolicy(allow_loopback=True),
            signature_scheme="standard",
        )
    key = await make_key(wa_tenant.tenant, scopes=["webhooks:manage"])
    async with outreach_api(key) as client:
        rotated = await client.post(f"/api/v1/webhooks/{endpoint.id}/rotate-secret", json={"overlap_s": 3600})
        too_long = await client.post(
            f"/api/v1/webhooks/{endpoint.id}/rotate-secret", json={"overlap_s": 10**7}
        )
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["secret"]
    assert rotated.json()["previous_secret_until"] is not None and new != old
    Webhook(new)  # a secret the Standard Webhooks libraries read
    async with sessions() as session:
        row = await session.get(WebhookEndpoint, endpoint.id)
        assert signing_secrets(row, cipher) == [new, old]
    assert (too_long.status_code, too_long.json()["code"]) == (422, "invalid_request")


async def test_an_attachment_is_checked_by_its_content_and_sent_inside_the_window(
    outreach_api, make_key, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from sqlalchemy import update
    from switchboard.db.models import Conversation, utcnow

    key = await make_key(wa_tenant.tenant, scopes=["messages:write"])
    async with outreach_api(key) as client:
        await _refresh(client)
        started = (
            await client.post("/api/v1/conversations", json={"phone": random_phone(), "template": ORDER})
        ).json()
        url = f"/api/v1/conversations/{started['conversation_id']}/attachments"
        outside = await client.post(url, files={"file": ("p.png", PNG, "image/png")})
        async with sessions() as session, session.begin():
            await session.exec(
                update(Conversation)
                .where(Conversation.id == started["conversation_id"])
                .values(last_customer_message_at=utcnow() - timedelta(minutes=2))
            )
        disguised = await client.post(url, files={"file": ("p.png", b"MZ\x90\x00 not an image", "image/png")})
        sent = await client.post(
            url, files={"file": ("p.png", PNG, "image/png")}, data={"caption": "Your parcel"}
        )
    assert (outside.status_code, outside.json()["code"]) == (409, "outside_customer_service_window")
    assert (disguised.status_code, disguised.json()["code"]) == (415, "unsupported_media_type")
    assert sent.status_code == 202 and sent.json()["via"] == "image"
    async with sessions() as session:
        rows = (
            await session.exec(select(Outbox).where(Outbox.conversation_id == started["conversation_id"]))
        ).all()
    [image] = [r.payload for r in rows if r.payload["type"] == "media"]
    assert (image["media"][0]["kind"], image["media"][0]["mime"], image["media"][0]["caption"]) == (
        "image",
        "image/png",
        "Your parcel",
    )


async def test_a_tenant_with_two_numbers_is_told_their_ids_and_a_disconnected_one_does_not_count(
    world, api, make_key, sessions, settings
) -> None:  # type: ignore[no-untyped-def]
    from switchboard.db.models import ChannelAccount

    from tests.utils.whatsapp import connect_whatsapp

    second = await connect_whatsapp(sessions, world.tenant, settings)
    key = await make_key(world.tenant, scopes=["messages:write"])
    async with api(key) as client:
        several = await client.post("/api/v1/whatsapp/templates/refresh", json={})
        async with sessions() as session, session.begin():
            row = await session.get(ChannelAccount, second.id)
            row.is_active = False  # type: ignore[union-attr]
        one = await client.post("/api/v1/whatsapp/templates/refresh", json={})
    assert several.status_code == 422 and several.json()["code"] == "channel_account_required"
    assert (
        str(second.id) in several.json()["detail"] and second.external_account_id in several.json()["detail"]
    )
    assert one.status_code == 200, one.text
