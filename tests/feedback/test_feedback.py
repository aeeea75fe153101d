"""Feedback: record_feedback joins the turn and trace; the route takes the admin token or the tenant's
app key; one rating per (message, source); the Langfuse export is optional."""

from __future__ import annotations

import sys

import httpx
import pytest
from sqlmodel import select
from structlog.testing import capture_logs
from switchboard.db.models import Feedback, Message, Turn
from switchboard.feedback import FeedbackRejected, record_feedback
from switchboard.feedback.langfuse import exporter_from_settings, score_of

from services.orchestrator.main import create_app as create_orchestrator
from tests.utils.agent import answer_with_script, make_conversation, text


@pytest.fixture
async def client(settings):
    app = create_orchestrator(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            yield http


@pytest.fixture
async def answered(make_tenant, sessions, offline_model, orchestrator):  # type: ignore[no-untyped-def]
    """A tenant, one answered turn, and the assistant message it wrote."""
    tenant = await make_tenant()
    script = await answer_with_script(sessions, tenant.id, offline_model)
    script.push(text("Our shop opens at nine."))
    conv = await make_conversation(sessions, tenant)
    request = conv.request("when do you open?")
    result = await orchestrator.handle_turn(request)
    async with sessions() as session:
        reply = (
            await session.exec(
                select(Message).where(
                    Message.conversation_id == conv.conversation.id, Message.role == "assistant"
                )
            )
        ).one()
        turn = (
            await session.exec(select(Turn).where(Turn.inbound_message_id == request.inbound_message_id))
        ).one()
    return tenant, reply, turn, result, request


def _admin(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"Authorization": f"Bearer {settings.secret('admin_token')}"}


async def test_record_feedback_joins_the_turn_and_trace_and_is_idempotent_per_source(answered, sessions):
    tenant, reply, turn, result, request = answered
    async with sessions() as session, session.begin():
        first = await record_feedback(
            session,
            tenant_id=tenant.id,
            message_id=reply.id,
            rating="down",
            comment="wrong hours",
            source="console:ana",
        )
        assert (first.turn_id, first.trace_id, first.conversation_id) == (
            turn.id,
            result.trace_id,
            reply.conversation_id,
        )
    async with sessions() as session, session.begin():
        again = await record_feedback(
            session, tenant_id=tenant.id, message_id=reply.id, rating="up", comment=None, source="console:ana"
        )
        other = await record_feedback(
            session,
            tenant_id=tenant.id,
            message_id=request.inbound_message_id,
            rating="up",
            comment=None,
            source="console:ana",
        )
    assert again.id == first.id and (again.rating, again.comment) == ("up", None)
    assert other.turn_id == turn.id  # the inbound message is joined to the turn that answered it
    async with sessions() as session:
        rows = (await session.exec(select(Feedback).where(Feedback.tenant_id == tenant.id))).all()
    assert sorted((r.message_id, r.rating) for r in rows) == sorted(
        [(reply.id, "up"), (request.inbound_message_id, "up")]
    )


async def test_record_feedback_refuses_another_tenants_message_and_bad_values(
    answered, make_tenant, sessions
):
    tenant, reply, *_ = answered
    stranger = await make_tenant()
    async with sessions() as session:
        with pytest.raises(FeedbackRejected) as missing:
            await record_feedback(
                session, tenant_id=stranger.id, message_id=reply.id, rating="up", comment=None, source="x"
            )
        assert missing.value.status_code == 404
        for kwargs in ({"rating": "meh"}, {"source": " "}, {"comment": "x" * 2001}):
            values = {"rating": "up", "comment": None, "source": "x", **kwargs}
            with pytest.raises(FeedbackRejected) as bad:
                await record_feedback(session, tenant_id=tenant.id, message_id=reply.id, **values)
            assert bad.value.status_code == 422


async def test_the_route_takes_the_admin_token_and_the_tenants_app_key(
    answered, client, settings, make_tenant
):
    tenant, reply, turn, result, _ = answered
    url = f"/v1/messages/{reply.id}/feedback"
    assert (await client.post(url, json={"rating": "up"})).status_code == 401
    assert (
        await client.post(url, json={"rating": "up"}, headers={"Authorization": "Bearer nope"})
    ).status_code == 401

    by_admin = await client.post(
        url, json={"rating": "down", "comment": "too slow"}, headers=_admin(settings)
    )
    assert by_admin.status_code == 200, by_admin.text
    body = by_admin.json()
    assert (body["source"], body["rating"], body["turn_id"], body["trace_id"], body["exported_at"]) == (
        "admin_api",
        "down",
        str(turn.id),
        result.trace_id,
        None,
    )

    issued = await client.post(f"/v1/admin/tenants/{tenant.slug}/feedback/app-key", headers=_admin(settings))
    assert issued.status_code == 201 and issued.json()["app_key"].startswith("sbfk_")
    app = {"Authorization": f"Bearer {issued.json()['app_key']}"}
    by_app = await client.post(url, json={"rating": "up", "source": "spoofed"}, headers=app)
    assert by_app.status_code == 200 and by_app.json()["source"] == "tenant_app"
    again = await client.post(url, json={"rating": "down"}, headers=app)
    assert again.json()["id"] == by_app.json()["id"] and again.json()["rating"] == "down"

    other = await make_tenant()
    other_key = await client.post(
        f"/v1/admin/tenants/{other.slug}/feedback/app-key", headers=_admin(settings)
    )
    foreign = {"Authorization": f"Bearer {other_key.json()['app_key']}"}
    assert (await client.post(url, json={"rating": "up"}, headers=foreign)).status_code == 401
    unknown = "/v1/messages/00000000-0000-0000-0000-000000000000/feedback"
    assert (await client.post(unknown, json={"rating": "up"}, headers=app)).status_code == 401
    assert (await client.post(unknown, json={"rating": "up"}, headers=_admin(settings))).status_code == 404
    assert (await client.post(url, json={"rating": "meh"}, headers=_admin(settings))).status_code == 422


async def test_langfuse_keys_without_the_sdk_log_clearly_and_store_anyway(
    answered, make_settings, monkeypatch
):
    tenant, reply, *_ = answered
    monkeypatch.setitem(sys.modules, "langfuse", None)  # the package is not installed (an ImportError)
    settings = make_settings(langfuse_public_key="pk-lf-1", langfuse_secret_key="sk-lf-1")
    assert exporter_from_settings(make_settings()) is None  # no keys: no export, nothing logged
    app = create_orchestrator(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            with capture_logs() as logs:
                response = await http.post(
                    f"/v1/messages/{reply.id}/feedback", json={"rating": "up"}, headers=_admin(settings)
                )
    assert response.status_code == 200 and response.json()["exported_at"] is None
    assert [e["event"] for e in logs if e["event"].startswith("langfuse")] == ["langfuse_sdk_missing"]


def test_the_score_is_boolean_on_the_trace_with_the_feedback_id():
    row = Feedback(
        tenant_id="00000000-0000-0000-0000-000000000001",
        message_id="00000000-0000-0000-0000-000000000002",
        trace_id="ab" * 16,
        rating="down",
        comment="no",
        source="admin_api",
    )
    assert score_of(row) == {
        "score_id": str(row.id),
        "trace_id": "ab" * 16,
        "name": "user_feedback",
        "value": 0,
        "data_type": "BOOLEAN",
        "comment": "no",
    }
