"""Event webhooks against a local receiver (a real HTTP server on a free port) that verifies every
signature: delivery, retries with back-off, timeouts, the endpoint disabled after a run of failures,
SSRF refusals, and the events emitted where things happen."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from sqlalchemy import update
from sqlmodel import col, select
from switchboard.conversations import Actor, close, start_conversation, to_human
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Customer, EventOutbox, WebhookDelivery, WebhookEndpoint, utcnow
from switchboard.egress import EgressPolicy
from switchboard.events import UnknownEventType, emit
from switchboard.events.delivery import run_event_delivery
from switchboard.events.endpoints import EndpointRefused, create_endpoint
from switchboard.events.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, verify

from tests.utils.servers import serve_app


@dataclass
class Receiver:
    """The tenant's system: verifies each delivery's signature with the secret it was given."""

    secret: str = ""
    answers: list[int] = field(default_factory=list)
    """Status codes to answer, in order (then 200)."""
    delay_s: float = 0.0
    received: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/hook")
        async def hook(request: Request) -> Response:
            raw = await request.body()
            ok = verify(
                self.secret,
                raw,
                timestamp=request.headers[TIMESTAMP_HEADER],
                signature=request.headers[SIGNATURE_HEADER],
            )
            self.received.append({"body": json.loads(raw), "verified": ok, "headers": dict(request.headers)})
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return Response(status_code=self.answers.pop(0) if self.answers else (200 if ok else 401))

        return app


@pytest.fixture
def hook_settings(make_settings):  # type: ignore[no-untyped-def]
    return make_settings(
        egress_allow_loopback=True,
        webhook_timeout_s=0.5,
        webhook_backoff_base_s=0.01,
        webhook_backoff_max_s=0.02,
        webhook_max_attempts=3,
        webhook_disable_after_failures=4,
    )


async def _endpoint(sessions, settings, tenant, url, receiver, events=()):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        endpoint, secret = await create_endpoint(
            session,
            tenant_id=tenant.id,
            url=url,
            event_types=list(events),
            description="crm",
            cipher=CredentialCipher(settings.secret("encryption_key").encode()),
            egress=EgressPolicy(allow_loopback=True),
        )
    receiver.secret = secret
    return endpoint


async def _deliver(sessions, settings, rounds=1):  # type: ignore[no-untyped-def]
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    reports = []
    for _ in range(rounds):
        reports.append(await run_event_delivery(sessions, settings, cipher=cipher))
        await _make_due(sessions)
    return reports


async def _make_due(sessions):  # type: ignore[no-untyped-def]
    """Move every waiting retry to now instead of sleeping out the back-off."""
    async with sessions() as session, session.begin():
        await session.execute(
            update(WebhookDelivery)
            .where(col(WebhookDelivery.status) == "pending")
            .values(next_attempt_at=utcnow())
        )


async def _deliveries(sessions, endpoint_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list(
            (
                await session.exec(select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint_id))
            ).all()
        )


async def _customer(sessions, tenant):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=f"u-{uuid.uuid4().hex[:8]}"
        )
        session.add(customer)
    return customer


async def test_lifecycle_events_are_delivered_signed_once_each(sessions, make_tenant, hook_settings) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    receiver = Receiver()
    async with serve_app(receiver.app()) as url:
        endpoint = await _endpoint(sessions, hook_settings, tenant, f"{url}/hook", receiver)
        customer = await _customer(sessions, tenant)
        async with sessions() as session, session.begin():
            conversation = await start_conversation(session, customer=customer, channel_account_id=None)
        async with sessions() as session, session.begin():
            conversation = await session.get(type(conversation), conversation.id)
            await to_human(session, conversation, agent_id=None, actor=Actor.ai(), reason="wants a person")
        reports = await _deliver(sessions, hook_settings, rounds=3)  # other tests' events may queue first
    assert sum(r.delivered for r in reports) == 2 and len(receiver.received) == 2  # never twice
    assert [r["verified"] for r in receiver.received] == [True, True]
    bodies = sorted(
        (r["body"] for r in receiver.received), key=lambda b: b["created_at"]
    )  # sent concurrently
    assert [b["type"] for b in bodies] == ["conversation.created", "conversation.handed_off"]
    assert bodies[0]["data"] == {
        "conversation_id": str(conversation.id),
        "customer_id": str(customer.id),
        "channel": "whatsapp",
    }
    assert bodies[1]["data"]["reason"] == "wants a person" and bodies[1]["data"]["actor_type"] == "ai"
    assert {b["tenant_id"] for b in bodies} == {str(tenant.id)}
    headers = next(r["headers"] for r in receiver.received if r["body"]["id"] == bodies[0]["id"])
    assert (
        headers["x-switchboard-event"] == "conversation.created"
        and headers["x-switchboard-delivery"] == bodies[0]["id"]
    )
    (first, second) = sorted(await _deliveries(sessions, endpoint.id), key=lambda d: d.created_at)
    assert (first.status, first.attempts, first.log[0]["status_code"]) == ("delivered", 1, 200)


async def test_a_failing_endpoint_is_retried_then_succeeds(sessions, make_tenant, hook_settings) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    receiver = Receiver(answers=[500, 503])
    async with serve_app(receiver.app()) as url:
        endpoint = await _endpoint(
            sessions, hook_settings, tenant, f"{url}/hook", receiver, events=["lead.created"]
        )
        async with sessions() as session, session.begin():
            await emit(
                session,
                tenant_id=tenant.id,
                event_type="conversation.closed",
                data={"conversation_id": uuid.uuid4(), "channel": "gmail", "actor_type": "ai"},
            )
            await emit(
                session,
                tenant_id=tenant.id,
                event_type="lead.created",
                data={
                    "lead_id": uuid.uuid4(),
                    "interest": "DN50 valve",
                    "summary": "wants 3",
                    "consent": "granted",
                    "source": "intent",
                },
            )
        await _deliver(sessions, hook_settings, rounds=3)
    (delivery,) = await _deliveries(sessions, endpoint.id)  # the endpoint wants lead.created only
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    assert [entry["status_code"] for entry in delivery.log] == [500, 503, 200]
    assert len({r["body"]["id"] for r in receiver.received}) == 1  # the same event id on every retry
    async with sessions() as session:
        assert (await session.get(WebhookEndpoint, endpoint.id)).consecutive_failures == 0


async def test_timeouts_fail_the_delivery_and_a_run_of_failures_disables_the_endpoint(
    sessions, make_tenant, hook_settings, caplog
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    receiver = Receiver(delay_s=1.0)  # over the 0.5 s timeout
    async with serve_app(receiver.app()) as url:
        endpoint = await _endpoint(sessions, hook_settings, tenant, f"{url}/hook", receiver)
        async with sessions() as session, session.begin():
            for _ in range(2):
                await emit(
                    session,
                    tenant_id=tenant.id,
                    event_type="approval.requested",
                    data={"pending_action_id": uuid.uuid4(), "tool_name": "refund"},
                )
        reports = await _deliver(sessions, hook_settings, rounds=3)
    deliveries = await _deliveries(sessions, endpoint.id)
    assert sorted(d.attempts for d in deliveries) == [2, 2]  # 4 failures in a row: disabled before a 3rd try
    assert all(d.status == "pending" and d.last_error == "timeout after 0.5 s" for d in deliveries)
    # the run is for every tenant: endpoints other tests left behind may be disabled in it too
    assert sum(r.disabled_endpoints for r in reports) >= 1
    async with sessions() as session:
        stored = await session.get(WebhookEndpoint, endpoint.id)
    assert (stored.is_active, stored.consecutive_failures) == (False, 4)
    assert stored.disabled_reason == "4 consecutive failed deliveries; last: timeout after 0.5 s"


async def test_attempts_run_out_into_failed(sessions, make_tenant, make_settings) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(egress_allow_loopback=True, webhook_backoff_base_s=0.01, webhook_max_attempts=2)
    tenant = await make_tenant()
    receiver = Receiver(answers=[500, 500, 500])
    async with serve_app(receiver.app()) as url:
        endpoint = await _endpoint(sessions, settings, tenant, f"{url}/hook", receiver)
        async with sessions() as session, session.begin():
            await emit(
                session,
                tenant_id=tenant.id,
                event_type="feedback.created",
                data={
                    "feedback_id": uuid.uuid4(),
                    "message_id": uuid.uuid4(),
                    "rating": "down",
                    "source": "console",
                },
            )
        await _deliver(sessions, settings, rounds=3)
    (delivery,) = await _deliveries(sessions, endpoint.id)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 2, 500)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://crm.example.com/hook", "must start with https://"),
        ("https://10.0.0.5/hook", "policy refused 10.0.0.5: it is a private address"),
        ("https://169.254.169.254/latest/meta-data", "it is a link-local address"),
        ("https://[::1]/hook", "it is a loopback address"),
        ("https://localhost.example.localhost/hook", "not a public host"),
        ("https://localhost/hook", "not a public host"),
        ("https://user:pw@crm.example.com/hook", "user name or password"),
        ("http://127.0.0.1:9/hook", "it is a loopback address"),  # loopback only when the operator allows it
    ],
)
async def test_endpoint_urls_are_refused(sessions, make_tenant, settings, url: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    async with sessions() as session:
        with pytest.raises(EndpointRefused, match=reason):
            await create_endpoint(
                session,
                tenant_id=tenant.id,
                url=url,
                event_types=[],
                description="crm",
                cipher=CredentialCipher(settings.secret("encryption_key").encode()),
                egress=EgressPolicy(),
            )


async def test_public_https_and_allowed_loopback_are_accepted() -> None:
    assert await EgressPolicy().check("https://93.184.215.14/h") == "https://93.184.215.14/h"
    assert await EgressPolicy(allow_loopback=True).check("http://127.0.0.1:9/h") == "http://127.0.0.1:9/h"


def test_signature_binds_the_timestamp_and_refuses_replays() -> None:
    body, now = b'{"id":"e1"}', int(time.time())
    signature = sign("whsec_x", now, body)
    assert verify("whsec_x", body, timestamp=str(now), signature=signature)
    assert not verify("whsec_x", body, timestamp=str(now + 1), signature=signature)  # re-stamped
    assert not verify("whsec_x", body + b" ", timestamp=str(now), signature=signature)
    assert not verify(
        "whsec_x", body, timestamp=str(now), signature=signature, now=now + 301
    )  # replayed later


async def test_emit_refuses_unknown_types_and_bad_data(session, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    with pytest.raises(UnknownEventType):
        await emit(session, tenant_id=tenant.id, event_type="order.paid", data={})
    with pytest.raises(ValueError, match="consent"):
        await emit(
            session,
            tenant_id=tenant.id,
            event_type="lead.created",
            data={
                "lead_id": uuid.uuid4(),
                "interest": "",
                "summary": "",
                "consent": "maybe",
                "source": "intent",
            },
        )


async def test_closing_writes_conversation_closed_in_the_same_transaction(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    customer = await _customer(sessions, tenant)
    async with sessions() as session, session.begin():
        conversation = await start_conversation(session, customer=customer, channel_account_id=None)
        await close(session, conversation, actor=Actor.ai(), reason="done")
    async with sessions() as session:
        types = (
            await session.exec(
                select(EventOutbox.event_type)
                .where(EventOutbox.tenant_id == tenant.id)
                .order_by(col(EventOutbox.created_at))
            )
        ).all()
    assert list(types) == ["conversation.created", "conversation.closed"]


async def test_events_of_a_disabled_endpoint_wait_and_go_out_once_it_is_enabled(
    sessions, make_tenant, hook_settings
) -> None:  # type: ignore[no-untyped-def]
    """``webhooks disable`` says its events wait: an event that happens while the endpoint is disabled
    (by an admin, or by a receiver's outage) is delivered after it is enabled, not dropped."""
    from switchboard.events.endpoints import set_endpoint_active

    tenant = await make_tenant()
    receiver = Receiver()
    async with serve_app(receiver.app()) as url:
        endpoint = await _endpoint(sessions, hook_settings, tenant, f"{url}/hook", receiver)
        async with sessions() as session, session.begin():
            stored = await session.get(WebhookEndpoint, endpoint.id)
            set_endpoint_active(stored, False, reason="disabled by an admin")
            session.add(stored)
        async with sessions() as session, session.begin():
            await emit(
                session,
                tenant_id=tenant.id,
                event_type="approval.requested",
                data={"pending_action_id": uuid.uuid4(), "tool_name": "refund"},
            )
        await _deliver(sessions, hook_settings)
        waiting = await _deliveries(sessions, endpoint.id)
        assert [(d.status, d.attempts) for d in waiting] == [("pending", 0)] and receiver.received == []
        async with sessions() as session, session.begin():
            stored = await session.get(WebhookEndpoint, endpoint.id)
            set_endpoint_active(stored, True, reason=None)
            session.add(stored)
        await _deliver(sessions, hook_settings)
    assert [d.status for d in await _deliveries(sessions, endpoint.id)] == ["delivered"]
    assert [r["body"]["type"] for r in receiver.received] == ["approval.requested"]
