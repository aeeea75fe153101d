"""Button ids acted on without a model turn: ``talk_to_human`` escalates, ``Unsubscribe`` opts out.

Signed webhooks of the real payload files → the real worker → the Graph sandbox. The offline model
server stands in for the provider: it must see no turn for these messages.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update
from sqlmodel import select
from switchboard.channels.whatsapp.settings import WhatsAppSettings
from switchboard.db.models import Conversation, Customer, HumanAgent, Message, utcnow
from switchboard.handoff import HANDOFF_SUMMARY_INSTRUCTION, add_agent
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.conversations import assert_human_mode_has_owner, event_rows
from tests.utils.handoff import random_phone
from tests.utils.whatsapp import channel_service, load_payload, sent_to, text_body
from tests.utils.workers import run_workers_until_idle

CUSTOMER = "15550100099"


@pytest.fixture
def settings_(e2e_settings):  # type: ignore[no-untyped-def]
    return e2e_settings()


async def _post(settings, *bodies) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        for body in bodies:
            assert (await svc.post(body)).status_code == 200
    await run_workers_until_idle(settings)


async def _rerun(settings, sessions, arq_pool, wamid_prefix: str) -> None:  # type: ignore[no-untyped-def]
    """Run the job of the stored row again as if its worker had died before marking it done."""
    async with sessions() as session, session.begin():
        row = (
            await session.exec(
                select(Message).where(Message.external_id.startswith(wamid_prefix))  # type: ignore[attr-defined]
            )
        ).one()
        await session.exec(update(Message).where(Message.id == row.id).values(inbound_state="processing"))
    assert await arq_pool.enqueue_job("process_inbound", str(row.id), _job_id=f"rerun:{uuid.uuid4()}")
    await run_workers_until_idle(settings)
    async with sessions() as session:
        assert (await session.get(Message, row.id)).inbound_state == "done"


def _payload(name: str, wa_tenant) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """The payload file for this test's number, with a wamid of its own (rows are unique per wamid)."""
    body = load_payload(name, phone_number_id=wa_tenant.phone_number_id)
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    message["id"] = f"{message['id']}.{uuid.uuid4().hex}"
    return body


async def _conversation(sessions, wa_tenant) -> Conversation:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (
            await session.exec(select(Conversation).where(Conversation.tenant_id == wa_tenant.tenant.id))
        ).one()


async def test_talk_to_human_button_queues_without_a_model_turn_and_once_on_rerun(
    settings_, wa_tenant, sessions, graph_sandbox, script, arq_pool
):  # type: ignore[no-untyped-def]
    model = await script(handoff={"queue_reply": "We answer from 9 to 5."})
    body = _payload("interactive_button_reply.json", wa_tenant)
    wamid = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    await _post(settings_, body)
    pid = wa_tenant.phone_number_id
    assert [(m["to"], m["text"]) for m in sent_to(graph_sandbox[1], pid)] == [
        (CUSTOMER, "We answer from 9 to 5.")
    ]
    conversation = await _conversation(sessions, wa_tenant)
    assert conversation.status == "human"
    assert conversation.queued_at is not None and conversation.assigned_agent_id is None
    assert conversation.escalation_reason == "customer pressed Talk to a person"
    assert model.requests == []

    await _rerun(settings_, sessions, arq_pool, wamid)
    assert len(sent_to(graph_sandbox[1], pid)) == 1
    assert model.requests == []
    events = await event_rows(sessions, wa_tenant.tenant.id, conversation.id)
    assert [e[:5] for e in events] == [  # the re-run escalated again, but nothing changed hands
        (None, "ai", None, "customer", str(conversation.customer_id)),
        ("ai", "human", None, "customer", str(conversation.customer_id)),
    ]
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)


async def test_talk_to_human_button_assigns_the_online_agent_with_a_summary(
    settings_, wa_tenant, sessions, graph_sandbox, script, arq_pool
):  # type: ignore[no-untyped-def]
    model = await script()
    model.push(ScriptedResponse(content="Customer asked for a person by button."))
    async with sessions() as session, session.begin():
        nia = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        nia.last_inbound_at = utcnow() - timedelta(minutes=5)
    body = _payload("interactive_button_reply.json", wa_tenant)
    wamid = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    await _post(settings_, body)
    pid = wa_tenant.phone_number_id
    sent = sent_to(graph_sandbox[1], pid)
    assert (sent[0]["to"], sent[0]["text"]) == (CUSTOMER, AgentSettings().handoff_reply)
    assert sent[1]["to"] == nia.phone
    assert "Reason: customer pressed Talk to a person" in sent[1]["text"]
    assert "Summary: Customer asked for a person by button." in sent[1]["text"]
    # the only model call is the agent's summary, not a turn for the customer
    assert [r["messages"][0] for r in model.requests] == [
        {"role": "system", "content": HANDOFF_SUMMARY_INSTRUCTION}
    ]
    conversation = await _conversation(sessions, wa_tenant)
    assert (conversation.status, conversation.assigned_agent_id) == ("human", nia.id)

    await _rerun(settings_, sessions, arq_pool, wamid)
    assert len(sent_to(graph_sandbox[1], pid)) == 2
    assert len(model.requests) == 1
    async with sessions() as session:
        agent = await session.get(HumanAgent, nia.id)
    assert (agent.current_load, agent.total_conversations) == (1, 1)
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)


async def test_the_same_conversation_escalated_twice_at_once_gets_one_agent(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    model.default = ScriptedResponse(content="Customer asked for a person by button.")
    async with sessions() as session, session.begin():
        agents = [
            await add_agent(
                session, tenant_id=wa_tenant.tenant.id, name=name, phone=random_phone(), online=True
            )
            for name in ("Nia", "Leo")
        ]
        for agent in agents:
            agent.last_inbound_at = utcnow() - timedelta(minutes=5)
    # two presses of "talk to a person" in one delivery: their jobs run at the same time
    await _post(
        settings_,
        _payload("interactive_button_reply.json", wa_tenant),
        _payload("interactive_button_reply.json", wa_tenant),
    )
    conversation = await _conversation(sessions, wa_tenant)
    async with sessions() as session:
        loads = {
            a.id: (a.current_load, a.total_conversations)
            for a in [await session.get(HumanAgent, a.id) for a in agents]
        }
    assert conversation.status == "human" and conversation.assigned_agent_id in loads
    assigned = conversation.assigned_agent_id
    assert loads == {a.id: (1, 1) if a.id == assigned else (0, 0) for a in agents}
    phones = {a.id: a.phone for a in agents}
    notices = [m["to"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id) if m["to"] != CUSTOMER]
    assert set(notices) == {phones[assigned]}  # notices go to that agent only
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)


async def test_unsubscribe_button_opts_out_then_ordinary_messages_are_answered(
    settings_, wa_tenant, sessions, graph_sandbox, script, arq_pool
):  # type: ignore[no-untyped-def]
    model = await script()
    body = _payload("button_template_quick_reply.json", wa_tenant)
    wamid = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    before = utcnow()
    await _post(settings_, body)
    after = utcnow()
    pid = wa_tenant.phone_number_id
    assert [(m["to"], m["text"]) for m in sent_to(graph_sandbox[1], pid)] == [
        (CUSTOMER, WhatsAppSettings().opt_out_reply)
    ]
    async with sessions() as session:
        customer = (
            await session.exec(select(Customer).where(Customer.tenant_id == wa_tenant.tenant.id))
        ).one()
    opt_out = customer.profile["marketing_opt_out"]
    assert opt_out["source"] == {"channel": "whatsapp", "payload": "Unsubscribe", "message_id": wamid}
    assert before <= datetime.fromisoformat(opt_out["at"]) <= after  # recorded while the job ran
    assert model.requests == []
    assert (await _conversation(sessions, wa_tenant)).status == "ai"

    await _rerun(settings_, sessions, arq_pool, wamid)
    assert len(sent_to(graph_sandbox[1], pid)) == 1
    async with sessions() as session:
        again = await session.get(Customer, customer.id)
    assert again.profile["marketing_opt_out"] == opt_out

    model.push(ScriptedResponse(content="It comes in blue and green."))
    await _post(
        settings_,
        text_body(
            phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="Other colours?", wa_id=CUSTOMER
        ),
    )
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "It comes in blue and green."
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "Other colours?"}


async def test_tenant_payload_lists_and_reply_are_configurable(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script(
        handoff={"button_payloads": []},
        whatsapp={"opt_out_payloads": ["  UNSUBSCRIBE "], "opt_out_reply": "Done: no more offers."},
    )
    model.push(ScriptedResponse(content="Sure, what can I do for you?"))
    await _post(settings_, _payload("interactive_button_reply.json", wa_tenant))
    await _post(settings_, _payload("button_template_quick_reply.json", wa_tenant))
    texts = [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)]
    assert texts == ["Sure, what can I do for you?", "Done: no more offers."]
    assert [r["messages"][-1]["content"] for r in model.requests] == [
        "Talk to a person [chose option id: talk_to_human]"
    ]
    assert (await _conversation(sessions, wa_tenant)).status == "ai"


async def test_invalid_button_settings_fall_back_to_the_defaults(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script(whatsapp={"opt_out_payloads": "STOP"}, handoff={"button_payloads": [1, 2]})
    await _post(settings_, _payload("button_template_quick_reply.json", wa_tenant))
    assert [m["text"] for m in sent_to(graph_sandbox[1], wa_tenant.phone_number_id)] == [
        WhatsAppSettings().opt_out_reply
    ]
    assert model.requests == []


async def test_text_then_button_in_one_burst_both_get_their_answer(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    model.push(ScriptedResponse(content="Our shop opens at 9."))
    pid = wa_tenant.phone_number_id
    text = text_body(
        phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="When do you open?", wa_id=CUSTOMER
    )
    await _post(settings_, text, _payload("button_template_quick_reply.json", wa_tenant))
    texts = sorted(m["text"] for m in sent_to(graph_sandbox[1], pid))
    assert texts == sorted(["Our shop opens at 9.", WhatsAppSettings().opt_out_reply])
    assert [r["messages"][-1]["content"] for r in model.requests] == ["When do you open?"]
    async with sessions() as session:
        rows = (await session.exec(select(Message).where(Message.tenant_id == wa_tenant.tenant.id))).all()
    assert sorted((r.kind, r.inbound_state, r.last_error) for r in rows if r.direction == "inbound") == [
        ("button", "done", None),
        ("text", "done", None),
    ]


async def test_a_spanish_tenant_hears_the_queue_reply_in_spanish(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    await script(locale={"language": "es"})
    await _post(settings_, _payload("interactive_button_reply.json", wa_tenant))
    sent = sent_to(graph_sandbox[1], wa_tenant.phone_number_id)
    assert [(m["to"], m["text"]) for m in sent] == [
        (
            CUSTOMER,
            "Todo nuestro equipo está ocupado en este momento. Una persona le responderá aquí en cuanto haya "
            "alguien disponible; no hace falta que vuelva a escribir.",
        )
    ]
