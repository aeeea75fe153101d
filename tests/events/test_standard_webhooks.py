"""Event webhooks signed the Standard Webhooks way, checked by that project's own Python library
(``standardwebhooks``) in a real receiver, and secrets rotated with an overlap."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from fastapi import FastAPI, Request, Response
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from switchboard.conversations import start_conversation
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Customer, WebhookEndpoint, utcnow
from switchboard.egress import EgressPolicy
from switchboard.events.delivery import run_event_delivery
from switchboard.events.endpoints import EndpointRefused, create_endpoint, rotate_secret, signing_secrets
from switchboard.events.signing import verify

from tests.utils.servers import serve_app


@dataclass
class Received:
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/hook")
        async def hook(request: Request) -> Response:
            self.raw.append(await request.body())
            self.headers.append(dict(request.headers))
            return Response(status_code=204)

        return app


@pytest.fixture
def hook_settings(make_settings):  # type: ignore[no-untyped-def]
    return make_settings(egress_allow_loopback=True, webhook_timeout_s=2.0)


def _cipher(settings) -> CredentialCipher:  # type: ignore[no-untyped-def]
    return CredentialCipher(settings.secret("encryption_key").encode())


async def _endpoint(sessions, settings, tenant, url: str, scheme: str) -> tuple[WebhookEndpoint, str]:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        return await create_endpoint(
            session,
            tenant_id=tenant.id,
            url=url,
            event_types=["conversation.created"],
            description="",
            cipher=_cipher(settings),
            egress=EgressPolicy(allow_loopback=True),
            signature_scheme=scheme,
        )


async def _one_event(sessions, settings, tenant, received: Received) -> tuple[bytes, dict[str, str]]:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        customer = Customer(
            tenant_id=tenant.id, channel="whatsapp", external_user_id=f"u-{uuid.uuid4().hex[:8]}"
        )
        session.add(customer)
        await session.flush()
        await start_conversation(session, customer=customer, channel_account_id=None)
    before = len(received.raw)
    for _ in range(4):  # other tests' events may go first
        await run_event_delivery(sessions, settings, cipher=_cipher(settings))
        if len(received.raw) > before:
            break
    assert len(received.raw) == before + 1
    return received.raw[-1], received.headers[-1]


async def test_a_standard_delivery_verifies_with_the_standardwebhooks_library_and_tampering_fails(
    sessions, make_tenant, hook_settings
) -> None:  # type: ignore[no-untyped-def]
    tenant, received = await make_tenant(), Received()
    async with serve_app(received.app()) as url:
        endpoint, secret = await _endpoint(sessions, hook_settings, tenant, f"{url}/hook", "standard")
        raw, headers = await _one_event(sessions, hook_settings, tenant, received)
    assert endpoint.signature_scheme == "standard"
    payload = Webhook(secret).verify(raw, headers)
    assert payload["type"] == "conversation.created" and payload["tenant_id"] == str(tenant.id)
    assert headers["webhook-id"] == payload["id"] == headers["x-switchboard-delivery"]
    assert headers["webhook-signature"].startswith("v1,") and "x-switchboard-signature" not in headers

    tampered = json.loads(raw)
    tampered["data"]["channel"] = "instagram"
    for body, changed in (
        (json.dumps(tampered, separators=(",", ":")).encode(), headers),
        (raw, {**headers, "webhook-id": str(uuid.uuid4())}),
        (raw, {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 1)}),
    ):
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(body, changed)
    other = Webhook("whsec_" + "A" * 43)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        other.verify(raw, headers)


async def test_during_a_rotation_both_secrets_sign_and_after_it_only_the_new_one(
    sessions, make_tenant, hook_settings
) -> None:  # type: ignore[no-untyped-def]
    tenant, received = await make_tenant(), Received()
    cipher = _cipher(hook_settings)
    async with serve_app(received.app()) as url:
        endpoint, old = await _endpoint(sessions, hook_settings, tenant, f"{url}/hook", "standard")
        async with sessions() as session, session.begin():
            row = await session.get(WebhookEndpoint, endpoint.id)
            new = rotate_secret(row, cipher, overlap_s=3600)
        raw, headers = await _one_event(sessions, hook_settings, tenant, received)
        assert len(headers["webhook-signature"].split(" ")) == 2
        assert Webhook(old).verify(raw, headers)["type"] == Webhook(new).verify(raw, headers)["type"]

        async with sessions() as session, session.begin():  # the overlap ended an hour ago
            row = await session.get(WebhookEndpoint, endpoint.id)
            newest = rotate_secret(row, cipher, overlap_s=3600, now=utcnow() - timedelta(hours=2))
            assert signing_secrets(row, cipher) == [newest]
        raw, headers = await _one_event(sessions, hook_settings, tenant, received)
    Webhook(newest).verify(raw, headers)
    for retired in (old, new):
        with pytest.raises(WebhookVerificationError):
            Webhook(retired).verify(raw, headers)


async def test_the_switchboard_signature_carries_both_secrets_during_a_rotation(
    sessions, make_tenant, hook_settings
) -> None:  # type: ignore[no-untyped-def]
    tenant, received = await make_tenant(), Received()
    async with serve_app(received.app()) as url:
        endpoint, old = await _endpoint(sessions, hook_settings, tenant, f"{url}/hook", "switchboard")
        async with sessions() as session, session.begin():
            row = await session.get(WebhookEndpoint, endpoint.id)
            new = rotate_secret(row, _cipher(hook_settings), overlap_s=600)
        raw, headers = await _one_event(sessions, hook_settings, tenant, received)
    timestamp, signature = headers["x-switchboard-timestamp"], headers["x-switchboard-signature"]
    assert "webhook-signature" not in headers
    assert verify(old, raw, timestamp=timestamp, signature=signature)
    assert verify(new, raw, timestamp=timestamp, signature=signature)
    assert not verify("whsec_other", raw, timestamp=timestamp, signature=signature)
    assert not verify(new, raw + b" ", timestamp=timestamp, signature=signature)


async def test_an_unknown_scheme_and_a_long_overlap_are_refused(sessions, make_tenant, hook_settings) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    with pytest.raises(EndpointRefused, match=r"signature_scheme is one of \['switchboard', 'standard'\]"):
        await _endpoint(sessions, hook_settings, tenant, "http://127.0.0.1:9/hook", "hmac")
    endpoint, _ = await _endpoint(sessions, hook_settings, tenant, "http://127.0.0.1:9/hook", "standard")
    with pytest.raises(EndpointRefused, match="overlap_s is 0 to 604800 seconds"):
        rotate_secret(endpoint, _cipher(hook_settings), overlap_s=604_801)


async def test_the_admin_api_registers_a_standard_endpoint_and_rotates_its_secret(
    make_tenant, orchestrator_url, settings, sessions
) -> None:  # type: ignore[no-untyped-def]
    import httpx

    tenant = await make_tenant()
    headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    base = f"/v1/admin/tenants/{tenant.slug}/webhooks"
    async with httpx.AsyncClient(base_url=orchestrator_url) as client:
        created = await client.post(
            base, json={"url": "https://93.184.215.14/hook", "signature_scheme": "standard"}, headers=headers
        )
        rotated = await client.post(
            f"{base}/{created.json()['id']}/rotate-secret", json={"overlap_s": 0}, headers=headers
        )
        listed = (await client.get(base, headers=headers)).json()
    assert created.status_code == 201 and created.json()["signature_scheme"] == "standard"
    Webhook(created.json()["secret"])  # a secret the Standard Webhooks libraries read
    assert rotated.status_code == 200 and rotated.json()["previous_secret_until"] is None
    assert listed[0]["signature_scheme"] == "standard" and "secret" not in listed[0]
    async with sessions() as session:
        row = await session.get(WebhookEndpoint, uuid.UUID(created.json()["id"]))
    assert signing_secrets(row, _cipher(settings)) == [rotated.json()["secret"]]
