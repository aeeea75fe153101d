"""A conversation handed back to the AI with ``/end`` answers what the customer wrote since the person's
last reply: webhook → worker → orchestrator (offline model) → Graph sandbox."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlmodel import select
from switchboard.db.models import Message, utcnow
from switchboard.handoff import add_agent
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.handoff import random_phone
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_workers_until_idle

CUSTOMER = "15550100077"


@pytest.fixture
def settings_(e2e_settings):  # type: ignore[no-untyped-def]
    return e2e_settings()


async def _post(settings, *bodies) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        for body in bodies:
            assert (await svc.post(body)).status_code == 200
    await run_workers_until_idle(settings)


def _text(wa_tenant, text, *, wa_id=CUSTOMER, name="Rui Costa"):  # type: ignore[no-untyped-def]
    return text_body(
        phone_number_id=wa_tenant.phone_number_id,
        wamid=f"wamid.{uuid.uuid4().hex}",
        text=text,
        wa_id=wa_id,
        name=name,
    )


async def test_end_answers_the_messages_after_the_persons_last_reply_in_one_turn(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    model.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "wants a person"}}],
        ),
        ScriptedResponse(content="A colleague will take over here."),
        ScriptedResponse(content="Customer wants a person."),  # the agent's notice, after
    )
    async with sessions() as session, session.begin():
        agent = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        agent.last_inbound_at = utcnow() - timedelta(minutes=5)
    pid = wa_tenant.phone_number_id
    await _post(settings_, _text(wa_tenant, "I need a person please"))
    await _post(settings_, _text(wa_tenant, "hello? anyone there?"))
    await _post(settings_, _text(wa_tenant, "Hi, I'm Nia. Your order ships today.", wa_id=agent.phone))
    await _post(settings_, _text(wa_tenant, "can I still change the colour?"))
    await _post(settings_, _text(wa_tenant, "to blue"))
    asked = len(model.requests)
    model.push(ScriptedResponse(content="Yes, blue it is."))

    await _post(settings_, _text(wa_tenant, "/end", wa_id=agent.phone))

    to_customer = [m["text"] for m in sent_to(graph_sandbox[1], pid) if m["to"] == CUSTOMER]
    assert to_customer == [
        "A colleague will take over here.",
        "Hi, I'm Nia. Your order ships today.",
        "Yes, blue it is.",
    ]
    assert len(model.requests) == asked + 1  # one turn answers both messages
    messages = model.requests[-1]["messages"]
    assert messages[-1] == {"role": "user", "content": "to blue"}
    assert {"role": "user", "content": "can I still change the colour?"} in messages
    async with sessions() as session:
        rows = {
            r.text: r
            for r in (
                await session.exec(select(Message).where(Message.tenant_id == wa_tenant.tenant.id))
            ).all()
        }
    assert rows["to blue"].inbound_state == "done"
    assert (rows["can I still change the colour?"].raw or {}).get("coalesced") is True
    assert not (rows["hello? anyone there?"].raw or {}).get("handed_back")  # Nia answered that one

    # a second /end with nothing new waiting queues nothing
    model.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "again"}}],
        ),
        ScriptedResponse(content="A colleague will take over again."),
        ScriptedResponse(content="Customer wants a person again."),  # the agent's notice, after
    )
    await _post(settings_, _text(wa_tenant, "a person again please"))
    await _post(settings_, _text(wa_tenant, "Here again, Nia.", wa_id=agent.phone))
    asked = len(model.requests)
    await _post(settings_, _text(wa_tenant, "/end", wa_id=agent.phone))
    assert len(model.requests) == asked
