"""A website visitor's conversation taken over by a human agent who works from WhatsApp: the widget's web
service, the tenant's WhatsApp number (the agents' console) and the real worker and orchestrator. Only the
model (the scripted offline server) and Meta's Graph API (the sandbox) stand in for what is outside."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlmodel import select
from switchboard.channels.base import shown_address
from switchboard.channels.web.widgets import user_hash
from switchboard.db.models import Conversation, Customer, Message, Role, utcnow
from switchboard.handoff import add_agent
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.console import log_in, new_user
from tests.utils.conversations import assert_human_mode_has_owner
from tests.utils.handoff import random_phone
from tests.utils.servers import serve_app
from tests.utils.web import ORIGIN, connect_web, new_visitor
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_workers_until_idle


@pytest.fixture
def settings_(e2e_settings):  # type: ignore[no-untyped-def]
    return e2e_settings()


async def _visitor_writes(settings, key: str, visitor: str, text: str, **who: str) -> None:  # type: ignore[no-untyped-def]
    from services.web.main import create_app

    body = {"key": key, "visitor": visitor, "messages": [{"id": uuid.uuid4().hex, "text": text}], **who}
    async with serve_app(create_app(settings)) as url, httpx.AsyncClient() as client:
        response = await client.post(url + "/web/v1/messages", json=body, headers={"Origin": ORIGIN})
    assert response.status_code == 200 and response.json()["stored"] == 1
    await run_workers_until_idle(settings)


async def _agent_writes(settings, wa_tenant, agent, text: str) -> None:  # type: ignore[no-untyped-def]
    body = text_body(
        phone_number_id=wa_tenant.phone_number_id,
        wamid=f"wamid.{uuid.uuid4().hex}",
        text=text,
        wa_id=agent.phone,
        name=agent.name,
    )
    async with channel_service(settings) as svc:
        assert (await svc.post(body)).status_code == 200
    await run_workers_until_idle(settings)


async def test_an_agent_on_whatsapp_takes_over_a_website_visitor_and_hands_back_to_the_ai(
    settings_, wa_tenant, sessions, graph_sandbox, web_streams, script
) -> None:  # type: ignore[no-untyped-def]
    model = await script()
    model.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "wants a refund"}}],
        ),
        ScriptedResponse(content="A colleague will take over here."),
        ScriptedResponse(content="Visitor wants a refund for a broken mug."),  # the agent's notice, after
    )
    async with sessions() as session, session.begin():
        nia = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        nia.last_inbound_at = utcnow() - timedelta(minutes=5)  # her WhatsApp service window is open
    account, _ = await connect_web(sessions, wa_tenant.tenant, settings_)
    key, visitor, streams = account.external_account_id, new_visitor(), web_streams[1]
    pid = wa_tenant.phone_number_id
    # the agent sees a short tag of the visitor, never the visitor id (their only key to their stream)
    label = f"visitor {hashlib.sha256(visitor.encode()).hexdigest()[:4]} on Website chat"

    await _visitor_writes(settings_, key, visitor, "My mug arrived broken, I want a person")
    assert [(r["to"], r["text"]) for r in await streams.replies(key)] == [
        (visitor, "A colleague will take over here.")
    ]
    notice = sent_to(graph_sandbox[1], pid)[0]
    assert notice["to"] == nia.phone
    assert f"Customer: {label}" in notice["text"]
    assert "Reason: wants a refund" in notice["text"]
    assert "Summary: Visitor wants a refund for a broken mug." in notice["text"]
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)
    requests_before = len(model.requests)

    # visitor → agent, on her WhatsApp (no model call)
    await _visitor_writes(settings_, key, visitor, "hello? anyone there?")
    relayed = sent_to(graph_sandbox[1], pid)[1]
    assert (relayed["to"], relayed["text"]) == (
        nia.phone,
        f"[{label}] hello? anyone there?",
    )
    # agent → visitor: the reply appears in the visitor's stream
    await _agent_writes(settings_, wa_tenant, nia, "Hi, I'm Nia. Sending a new mug today.")
    assert [(r["to"], r["text"]) for r in await streams.replies(key)][1:] == [
        (visitor, "Hi, I'm Nia. Sending a new mug today.")
    ]
    assert len(model.requests) == requests_before

    # /end hands the visitor back to the AI, which answers on the website again
    await _agent_writes(settings_, wa_tenant, nia, "/end")
    assert sent_to(graph_sandbox[1], pid)[2]["text"] == (f"{label} is back with the AI assistant.")
    model.push(ScriptedResponse(content="Anything else I can help with?"))
    await _visitor_writes(settings_, key, visitor, "thanks!")
    assert [r["text"] for r in await streams.replies(key)][2:] == ["Anything else I can help with?"]
    async with sessions() as session:
        conversation = (
            await session.exec(
                select(Conversation).where(
                    Conversation.tenant_id == wa_tenant.tenant.id, Conversation.channel == "web"
                )
            )
        ).one()
        customer = await session.get(Customer, conversation.customer_id)
        copy_row = (
            await session.exec(
                select(Message).where(
                    Message.conversation_id == conversation.id, Message.role == "human_agent"
                )
            )
        ).all()
    assert conversation.status == "ai" and customer is not None
    assert not [m for m in sent_to(graph_sandbox[1], pid) if visitor in m["text"]]
    assert [r.text for r in copy_row][0] == "Hi, I'm Nia. Sending a new mug today."


async def test_a_signed_in_visitor_gets_the_ai_and_the_agent_on_their_user_stream(
    settings_, wa_tenant, sessions, graph_sandbox, web_streams, script
) -> None:  # type: ignore[no-untyped-def]
    model = await script()
    model.push(
        ScriptedResponse(
            kind="tool_calls", tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "refund"}}]
        ),
        ScriptedResponse(content="A colleague will take over here."),
        ScriptedResponse(content="Ana wants a refund."),  # the agent's notice, after
    )
    async with sessions() as session, session.begin():
        nia = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        nia.last_inbound_at = utcnow() - timedelta(minutes=5)
    account, secret = await connect_web(sessions, wa_tenant.tenant, settings_)
    key = account.external_account_id
    signed = {"user_id": "42", "user_hash": user_hash(secret, "42"), "name": "Ana"}
    await _visitor_writes(settings_, key, new_visitor(), "I want a person", **signed)
    notice = sent_to(graph_sandbox[1], wa_tenant.phone_number_id)[0]
    assert "Customer: Ana (user 42 on Website chat)" in notice["text"]
    await _agent_writes(settings_, wa_tenant, nia, "Hi Ana, Nia here.")
    # every browser Ana signs in on reads the stream of user 42
    assert [(r["to"], r["text"]) for r in await streams_of(web_streams, key)] == [
        ("user:42", "A colleague will take over here."),
        ("user:42", "Hi Ana, Nia here."),
    ]


async def streams_of(web_streams, key: str) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return await web_streams[1].replies(key)


@given(visitor=st.from_regex(r"\A[A-Za-z0-9_-]{22,64}\Z"))
def test_a_visitor_is_shown_by_a_tag_never_by_their_id(visitor: str) -> None:
    shown = shown_address("web", visitor)
    assert shown == f"visitor {hashlib.sha256(visitor.encode()).hexdigest()[:4]}"
    assert visitor not in shown


def test_a_verified_user_is_shown_by_their_user_id_and_other_channels_by_their_address() -> None:
    assert shown_address("web", "user:42") == "user 42"
    assert shown_address("web", "42") == "user 42"  # a customer keyed by their user id
    assert shown_address("instagram", "1000000000000001") == "1000000000000001"


async def test_closing_a_visitors_conversation_in_the_console_tells_the_agent_and_says_goodbye_on_the_website(
    settings_, wa_tenant, sessions, graph_sandbox, web_streams, script
) -> None:  # type: ignore[no-untyped-def]
    from services.console.main import create_app

    model = await script(handoff={"farewell": "Thanks for writing to us!"})
    model.push(
        ScriptedResponse(
            kind="tool_calls", tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "refund"}}]
        ),
        ScriptedResponse(content="A colleague will take over here."),
        ScriptedResponse(content="Wants a refund."),  # the agent's notice, after
    )
    async with sessions() as session, session.begin():
        nia = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        nia.last_inbound_at = utcnow() - timedelta(minutes=5)
    account, _ = await connect_web(sessions, wa_tenant.tenant, settings_)
    key, visitor = account.external_account_id, new_visitor()
    await _visitor_writes(settings_, key, visitor, "I want a person")
    async with sessions() as session:
        conversation = (
            await session.exec(
                select(Conversation).where(
                    Conversation.tenant_id == wa_tenant.tenant.id, Conversation.channel == "web"
                )
            )
        ).one()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=wa_tenant.tenant.id, name="Pat")
    app = create_app(settings_)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=("10.9.8.7", 40000)),
            base_url="http://console.test",
            headers={"Accept": "text/html"},
        ) as client,
    ):
        me = await log_in(client, admin)
        closed = await me.post_form(f"/t/{wa_tenant.tenant.slug}/conversations/{conversation.id}/close")
    assert closed.status_code == 303
    await run_workers_until_idle(settings_)
    label = f"visitor {hashlib.sha256(visitor.encode()).hexdigest()[:4]} on Website chat"
    to_nia = [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id) if m["to"] == nia.phone]
    assert to_nia[-1] == f"{label} was closed by Pat."
    assert [(r["to"], r["text"]) for r in await web_streams[1].replies(key)] == [
        (visitor, "A colleague will take over here."),
        (visitor, "Thanks for writing to us!"),
        (visitor, "How did we do? Please rate this conversation."),  # the rating question, after the goodbye
    ]
    assert (await _reload_status(sessions, conversation.id)) == "closed"


async def _reload_status(sessions, conversation_id) -> str:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        row = await session.get(Conversation, conversation_id)
    return row.status
