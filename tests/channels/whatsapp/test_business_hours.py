"""Business hours at a frozen clock: out of hours, a request for a person waits for the next opening and
the customer is told when; with ``outside_hours = "person"`` the AI does not answer at all.

Signed webhooks of real payload files → the real worker → the Graph sandbox; the offline model server
stands in for the provider. The clock the hours are read at is frozen at a Saturday in Madrid.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select
from switchboard.db.models import Conversation, Outbox, utcnow
from switchboard.handoff import add_agent, hours
from switchboard.handoff.service import assign_at_opening
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.handoff import random_phone
from tests.utils.whatsapp import channel_service, load_payload, sent_to, text_body
from tests.utils.workers import run_workers_until_idle

CUSTOMER = "15550100099"
SATURDAY_NOON = datetime(2026, 12, 12, 11, 0, tzinfo=UTC)  # 12:00 in Madrid
MONDAY_TEN = datetime(2026, 12, 14, 9, 0, tzinfo=UTC)  # 10:00 in Madrid
HOURS = {
    "enabled": True,
    "timezone": "Europe/Madrid",
    "schedule": [
        {"day": d, "opens": "09:00", "closes": "18:00"} for d in ("mon", "tue", "wed", "thu", "fri")
    ],
}
OUT_OF_HOURS = (
    "Our team is away right now. We are back on Monday 14 December at 09:00, and a person will answer you "
    "here then; you don't need to write again."
)


@pytest.fixture
def settings_(e2e_settings):  # type: ignore[no-untyped-def]
    return e2e_settings()


@pytest.fixture
def clock(monkeypatch):  # type: ignore[no-untyped-def]
    """Freeze the clock business hours are read at (``clock(at)``)."""

    def freeze(at: datetime) -> None:
        monkeypatch.setattr(hours, "utcnow", lambda: at)

    return freeze


async def _post(settings, *bodies) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        for body in bodies:
            assert (await svc.post(body)).status_code == 200
    await run_workers_until_idle(settings)


def _button(wa_tenant) -> dict:  # type: ignore[no-untyped-def,type-arg]
    body = load_payload("interactive_button_reply.json", phone_number_id=wa_tenant.phone_number_id)
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    message["id"] = f"{message['id']}.{uuid.uuid4().hex}"
    return body


def _text(wa_tenant, text: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return text_body(phone_number_id=wa_tenant.phone_number_id, wamid=f"wamid.{uuid.uuid4().hex}", text=text)


async def _conversation(sessions, wa_tenant) -> Conversation:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (
            await session.exec(select(Conversation).where(Conversation.tenant_id == wa_tenant.tenant.id))
        ).one()


async def _online_agent(sessions, wa_tenant):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        agent = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        agent.last_inbound_at = utcnow() - timedelta(minutes=5)
    return agent


async def test_out_of_hours_a_person_button_waits_for_monday_and_says_so(
    settings_, wa_tenant, sessions, graph_sandbox, script, clock
):  # type: ignore[no-untyped-def]
    clock(SATURDAY_NOON)
    model = await script(hours=HOURS)
    nia = await _online_agent(sessions, wa_tenant)
    await _post(settings_, _button(wa_tenant))
    sent = sent_to(graph_sandbox[1], wa_tenant.phone_number_id)
    assert [(m["to"], m["text"]) for m in sent] == [(CUSTOMER, OUT_OF_HOURS)]  # Nia is not told
    conversation = await _conversation(sessions, wa_tenant)
    assert (conversation.status, conversation.assigned_agent_id) == ("human", None)
    assert conversation.queued_at is not None
    assert model.requests == []
    assert nia.phone not in [m["to"] for m in sent]


async def test_in_hours_the_online_agent_takes_it_at_once(
    settings_, wa_tenant, sessions, graph_sandbox, script, clock
):  # type: ignore[no-untyped-def]
    clock(MONDAY_TEN)
    model = await script(hours=HOURS)
    model.push(ScriptedResponse(content="Customer asked for a person by button."))
    nia = await _online_agent(sessions, wa_tenant)
    await _post(settings_, _button(wa_tenant))
    sent = sent_to(graph_sandbox[1], wa_tenant.phone_number_id)
    assert (sent[0]["to"], sent[0]["text"]) == (CUSTOMER, AgentSettings().handoff_reply)
    assert sent[1]["to"] == nia.phone
    assert (await _conversation(sessions, wa_tenant)).assigned_agent_id == nia.id


async def test_out_of_hours_the_ai_keeps_answering_by_default(
    settings_, wa_tenant, sessions, graph_sandbox, script, clock
):  # type: ignore[no-untyped-def]
    clock(SATURDAY_NOON)
    model = await script(hours=HOURS)
    model.push(ScriptedResponse(content="We ship in two days."))
    await _post(settings_, _text(wa_tenant, "When do you ship?"))
    texts = [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)]
    assert texts == ["We ship in two days."]
    assert (await _conversation(sessions, wa_tenant)).status == "ai"


async def test_out_of_hours_with_no_ai_the_customer_is_told_once_and_waits_in_spanish(
    settings_, wa_tenant, sessions, graph_sandbox, script, clock
):  # type: ignore[no-untyped-def]
    clock(SATURDAY_NOON)
    model = await script(hours={**HOURS, "outside_hours": "person"}, locale={"language": "es"})
    await _post(settings_, _text(wa_tenant, "Hola, ¿hay alguien?"))
    await _post(settings_, _text(wa_tenant, "¿Hola?"))
    texts = [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)]
    assert len(texts) == 1
    assert "el lunes 14 de diciembre a las 09:00" in texts[0]
    conversation = await _conversation(sessions, wa_tenant)
    assert (conversation.status, conversation.assigned_agent_id) == ("human", None)
    assert conversation.escalation_reason == "wrote outside business hours"
    assert model.requests == []


async def test_at_the_opening_the_online_agent_gets_what_waited_and_is_told(
    settings_, wa_tenant, sessions, graph_sandbox, script, clock
):  # type: ignore[no-untyped-def]
    clock(SATURDAY_NOON)
    await script(hours=HOURS)
    nia = await _online_agent(sessions, wa_tenant)
    await _post(settings_, _button(wa_tenant))
    assert await assign_at_opening(sessions, None, tenant_id=wa_tenant.tenant.id) == 0  # still closed
    assert (await _conversation(sessions, wa_tenant)).assigned_agent_id is None

    clock(MONDAY_TEN)
    assert await assign_at_opening(sessions, None, tenant_id=wa_tenant.tenant.id) == 1
    conversation = await _conversation(sessions, wa_tenant)
    assert (conversation.status, conversation.assigned_agent_id) == ("human", nia.id)
    async with sessions() as session:
        notices = (
            await session.exec(
                select(Outbox).where(Outbox.conversation_id == conversation.id, Outbox.recipient == nia.phone)
            )
        ).all()
    assert len(notices) == 1 and "New conversation for you." in notices[0].payload["text"]
    assert await assign_at_opening(sessions, None, tenant_id=wa_tenant.tenant.id) == 0  # given once
