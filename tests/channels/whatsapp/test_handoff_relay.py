"""Handoff over WhatsApp end to end: webhook → worker → orchestrator (offline model) → Graph sandbox.

Agents are real rows; their phones write signed webhooks like customers do. Only the model provider
(the offline server, scripted) and Meta's Graph API (the sandbox) stand in for what is outside.
"""

from __future__ import annotations

import copy
import uuid
from datetime import timedelta

import pytest
from sqlmodel import select
from switchboard.console import actions as console_actions
from switchboard.console.actions import Actioner
from switchboard.db.models import Conversation, HumanAgent, Message, Outbox, utcnow
from switchboard.handoff import HANDED_BACK_NOTE, HELP_TEXT, add_agent
from switchboard.outbox.retry import why_not_retryable
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.conversations import assert_human_mode_has_owner
from tests.utils.handoff import random_phone
from tests.utils.whatsapp import channel_service, new_media_id, sent_to, text_body
from tests.utils.workers import run_workers_until_idle

CUSTOMER = "15550100099"


@pytest.fixture
def settings_(e2e_settings):  # type: ignore[no-untyped-def]
    return e2e_settings()


async def _agent(sessions, wa_tenant, name, *, total=0, recent=True):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        agent = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name=name, phone=random_phone(), online=True
        )
        agent.total_conversations = total
        agent.last_inbound_at = utcnow() - (timedelta(minutes=5) if recent else timedelta(hours=30))
    return agent


async def _post(settings, wa_tenant, *bodies) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        for body in bodies:
            assert (await svc.post(body)).status_code == 200
    await run_workers_until_idle(settings)


def _text(wa_tenant, text, *, wa_id=CUSTOMER, name="Test Customer", context=None):  # type: ignore[no-untyped-def]
    body = text_body(
        phone_number_id=wa_tenant.phone_number_id,
        wamid=f"wamid.{uuid.uuid4().hex}",
        text=text,
        wa_id=wa_id,
        name=name,
    )
    if context:
        body["entry"][0]["changes"][0]["value"]["messages"][0]["context"] = {
            "from": "15550100001",
            "id": context,
        }
    return body


def _image(wa_tenant, *, wa_id, media_id, caption):  # type: ignore[no-untyped-def]
    body = _text(wa_tenant, "x", wa_id=wa_id)
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    del message["text"]
    message["type"] = "image"
    message["image"] = {"id": media_id, "mime_type": "image/jpeg", "sha256": "abc", "caption": caption}
    return copy.deepcopy(body)


def _escalation(script):  # type: ignore[no-untyped-def]
    script.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "wants a refund"}}],
        ),
        ScriptedResponse(content="A colleague will take over here."),
        ScriptedResponse(content="Customer wants a refund for a broken mug."),  # the agent's notice, after
    )


async def test_escalation_relay_both_ways_and_end_back_to_the_ai(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    _escalation(model)
    busy = await _agent(sessions, wa_tenant, "Busy", total=7)
    nia = await _agent(sessions, wa_tenant, "Nia", total=1)
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "My mug arrived broken, I want a person"))
    sent = sent_to(graph_sandbox[1], pid)
    assert [(m["to"], m["text"]) for m in sent][0] == (CUSTOMER, "A colleague will take over here.")
    notice = sent[1]
    assert notice["to"] == nia.phone and notice["to"] != busy.phone
    assert "Customer: Test Customer (+15550100099)" in notice["text"]
    assert "Reason: wants a refund" in notice["text"]
    assert "Summary: Customer wants a refund for a broken mug." in notice["text"]
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)
    requests_before = len(model.requests)

    # customer → agent (no model call)
    await _post(settings_, wa_tenant, _text(wa_tenant, "hello? anyone there?"))
    relayed = sent_to(graph_sandbox[1], pid)[2]
    assert (relayed["to"], relayed["text"]) == (
        nia.phone,
        "[Test Customer (+15550100099)] hello? anyone there?",
    )
    # agent → customer as plain text
    await _post(
        settings_,
        wa_tenant,
        _text(wa_tenant, "Hi, I'm Nia. Sending a new mug today.", wa_id=nia.phone, name="Nia"),
    )
    reply = sent_to(graph_sandbox[1], pid)[3]
    assert (reply["to"], reply["text"]) == (CUSTOMER, "Hi, I'm Nia. Sending a new mug today.")
    assert len(model.requests) == requests_before

    async with sessions() as session:
        rows = list(
            (await session.exec(select(Message).where(Message.tenant_id == wa_tenant.tenant.id))).all()
        )
    customer_row = next(r for r in rows if r.text == "hello? anyone there?")
    assert customer_row.proxy_metadata["sender"] == "customer"
    assert customer_row.proxy_metadata["relayed_to"] == nia.phone
    assert customer_row.proxy_metadata["original_message_id"] == customer_row.external_id
    copy_row = next(r for r in rows if r.role == "human_agent" and r.text.startswith("Hi, I'm Nia"))
    assert copy_row.proxy_metadata["sender"] == "human_agent"
    assert (copy_row.proxy_metadata["relayed_from"], copy_row.proxy_metadata["relayed_to"]) == (
        nia.phone,
        CUSTOMER,
    )
    assert copy_row.conversation_id == customer_row.conversation_id

    # /end → the AI answers again and its history knows a person handled it
    await _post(settings_, wa_tenant, _text(wa_tenant, "/END", wa_id=nia.phone, name="Nia"))
    assert (
        sent_to(graph_sandbox[1], pid)[4]["text"]
        == "Test Customer (+15550100099) is back with the AI assistant."
    )
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)
    model.push(ScriptedResponse(content="Anything else I can help with?"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "thanks!"))
    assert sent_to(graph_sandbox[1], pid)[5]["text"] == "Anything else I can help with?"
    history = model.requests[-1]["messages"]
    assert {"role": "assistant", "content": f"(a person from the team wrote) {HANDED_BACK_NOTE}"} in history
    assert {
        "role": "assistant",
        "content": "(a person from the team wrote) Hi, I'm Nia. Sending a new mug today.",
    } in history


async def test_agent_number_is_never_answered_by_the_ai_and_gets_command_answers(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    nia = await _agent(sessions, wa_tenant, "Nia")
    pid = wa_tenant.phone_number_id
    await _post(
        settings_, wa_tenant, _text(wa_tenant, "hello, is this thing on?", wa_id=nia.phone, name="Nia")
    )
    await _post(settings_, wa_tenant, _text(wa_tenant, "/help", wa_id=nia.phone, name="Nia"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "/dance", wa_id=nia.phone, name="Nia"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "/Status", wa_id=nia.phone, name="Nia"))
    texts = [(m["to"], m["text"]) for m in sent_to(graph_sandbox[1], pid)]
    assert texts[0] == (
        nia.phone,
        "You have no open conversation, so this message went nowhere. /status shows what you handle.",
    )
    assert texts[1] == (nia.phone, HELP_TEXT)
    assert texts[2][1].startswith("Unknown command /dance.")
    assert texts[3][1].startswith("You are online. Open conversations: 0.")
    assert model.requests == []
    async with sessions() as session:
        console = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == wa_tenant.tenant.id))
        ).one()
        agent = await session.get(HumanAgent, nia.id)
    assert (console.status, console.is_agent_console, console.assigned_agent_id) == ("human", True, None)
    assert agent.last_inbound_at > utcnow() - timedelta(minutes=1)
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)


async def test_queued_customer_is_delivered_when_an_agent_goes_online(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script(handoff={"queue_reply": "We answer from 9 to 5."})
    model.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "complaint"}}],
        ),
        ScriptedResponse(content="We answer from 9 to 5."),
        ScriptedResponse(content="Customer complains about a late parcel."),
    )
    async with sessions() as session, session.begin():
        late = await add_agent(session, tenant_id=wa_tenant.tenant.id, name="Late Leo", phone=random_phone())
        late.last_inbound_at = utcnow() - timedelta(hours=1)
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "my parcel is late, a human please"))
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["We answer from 9 to 5."]
    assert "We answer from 9 to 5." in model.requests[1]["messages"][-1]["content"]
    await _post(settings_, wa_tenant, _text(wa_tenant, "still waiting"))
    assert len(sent_to(graph_sandbox[1], pid)) == 1  # stored, nobody to relay to
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)
    await _post(settings_, wa_tenant, _text(wa_tenant, "/online", wa_id=late.phone, name="Leo"))
    answer, notice = sent_to(graph_sandbox[1], pid)[1:]
    assert answer["text"] == "You are online. 1 waiting conversation(s) are now yours."
    assert notice["to"] == late.phone and "Summary: Customer complains about a late parcel." in notice["text"]
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)


async def test_two_customers_reply_context_and_switch_pick_the_customer(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    model.default = ScriptedResponse(content="One moment.")
    nia = await _agent(sessions, wa_tenant, "Nia")
    pid = wa_tenant.phone_number_id
    second = "15550100077"
    for wa_id in (CUSTOMER, second):
        model.push(
            ScriptedResponse(
                kind="tool_calls", tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "r"}}]
            ),
            ScriptedResponse(content="A person will help."),
            ScriptedResponse(content="summary"),
        )
        await _post(
            settings_, wa_tenant, _text(wa_tenant, "person please", wa_id=wa_id, name=f"C{wa_id[-2:]}")
        )
    await _post(settings_, wa_tenant, _text(wa_tenant, "first customer again", wa_id=CUSTOMER, name="C99"))
    relayed = sent_to(graph_sandbox[1], pid)[-1]
    assert relayed["text"] == "[#1 C99 (+15550100099)] first customer again"
    await _post(
        settings_, wa_tenant, _text(wa_tenant, "answer to the first", wa_id=nia.phone, context=relayed["id"])
    )
    assert (sent_to(graph_sandbox[1], pid)[-1]["to"], sent_to(graph_sandbox[1], pid)[-1]["text"]) == (
        CUSTOMER,
        "answer to the first",
    )
    await _post(settings_, wa_tenant, _text(wa_tenant, "/switch 2", wa_id=nia.phone))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "Now talking to C77 (+15550100077) (#2)."
    await _post(settings_, wa_tenant, _text(wa_tenant, "hello second", wa_id=nia.phone))
    assert (sent_to(graph_sandbox[1], pid)[-1]["to"], sent_to(graph_sandbox[1], pid)[-1]["text"]) == (
        second,
        "hello second",
    )


async def test_media_is_relayed_both_ways(settings_, wa_tenant, sessions, graph_sandbox, script):  # type: ignore[no-untyped-def]
    model = await script()
    _escalation(model)
    nia = await _agent(sessions, wa_tenant, "Nia")
    pid = wa_tenant.phone_number_id
    crack, label = new_media_id(), new_media_id()
    graph_sandbox[1].media[crack] = (b"\xff\xd8\xff the crack", "image/jpeg")
    graph_sandbox[1].media[label] = (b"\xff\xd8\xff the label", "image/jpeg")
    await _post(settings_, wa_tenant, _text(wa_tenant, "person please"))
    await _post(settings_, wa_tenant, _image(wa_tenant, wa_id=CUSTOMER, media_id=crack, caption="the crack"))
    to_agent = sent_to(graph_sandbox[1], pid)[-2:]
    assert (to_agent[0]["to"], to_agent[0]["text"]) == (nia.phone, "[Test Customer (+15550100099)] the crack")
    # the media id Meta gave, or our copy of it uploaded to the number (the copy is made as it arrives)
    sent_id = to_agent[1]["body"]["image"]["id"]
    assert (to_agent[1]["type"], graph_sandbox[1].media[sent_id][0]) == ("image", b"\xff\xd8\xff the crack")
    await _post(settings_, wa_tenant, _image(wa_tenant, wa_id=nia.phone, media_id=label, caption="label"))
    to_customer = sent_to(graph_sandbox[1], pid)[-2:]
    assert [m["to"] for m in to_customer] == [CUSTOMER, CUSTOMER]
    image = to_customer[1]["body"]["image"]
    assert (image["caption"], graph_sandbox[1].media[image["id"]][0]) == ("label", b"\xff\xd8\xff the label")


async def test_a_notice_waiting_for_the_agents_window_is_dropped_once_the_conversation_is_not_theirs(
    settings_, wa_tenant, sessions, graph_sandbox, script, arq_pool
):  # type: ignore[no-untyped-def]
    """The notice of a conversation assigned to an agent outside their window waits for them; closed
    meanwhile, the conversation is no longer theirs: when they next write, the notice is not sent (and
    may not be retried), only the answer to what they wrote."""
    model = await script()
    _escalation(model)
    late = await _agent(sessions, wa_tenant, "Late", recent=False)
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "person please"))
    async with sessions() as session:
        conversation = (
            await session.exec(
                select(Conversation).where(
                    Conversation.tenant_id == wa_tenant.tenant.id, Conversation.assigned_agent_id == late.id
                )
            )
        ).one()
    await console_actions.close(
        sessions, arq_pool, who=Actioner(tenant_id=wa_tenant.tenant.id), conversation_id=conversation.id
    )
    await run_workers_until_idle(settings_)
    before = len(sent_to(graph_sandbox[1], pid))
    await _post(settings_, wa_tenant, _text(wa_tenant, "/status", wa_id=late.phone))
    to_agent = [m for m in sent_to(graph_sandbox[1], pid)[before:] if m["to"] == late.phone]
    assert len(to_agent) == 1 and "Reason: wants a refund" not in to_agent[0]["text"]
    assert not any("wants a refund" in (m["text"] or "") for m in sent_to(graph_sandbox[1], pid))
    async with sessions() as session:
        dropped = (
            await session.exec(
                select(Outbox).where(
                    Outbox.recipient == late.phone, Outbox.conversation_id == conversation.id
                )
            )
        ).all()
    assert dropped and {(o.status, o.error_code) for o in dropped} == {("failed", "agent_notice_stale")}
    refusal = why_not_retryable(channel="whatsapp", error_code="agent_notice_stale", external_id=None)
    assert refusal is not None and "no longer theirs" in refusal.text()


async def test_agent_outside_their_window_gets_the_template_or_nothing(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    _escalation(model)
    stale = await _agent(sessions, wa_tenant, "Stale", recent=False)
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "person please"))
    assert [m["to"] for m in sent_to(graph_sandbox[1], pid)] == [CUSTOMER]
    async with sessions() as session:
        notice = (
            await session.exec(
                select(Outbox).where(Outbox.tenant_id == wa_tenant.tenant.id, Outbox.recipient == stale.phone)
            )
        ).one()
    assert (notice.status, notice.error_code) == ("failed", "agent_window_closed")
    assert "no handoff.agent_template_name" in notice.error_message

    model = await script(
        handoff={"agent_template_name": "new_customer_waiting", "agent_template_language": "pt_BR"}
    )
    model.push(ScriptedResponse(content="ok"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "/transfer", wa_id=stale.phone))
    late_notice, answer = sent_to(graph_sandbox[1], pid)[1:]
    assert late_notice["to"] == stale.phone and "Reason: wants a refund" in late_notice["text"]
    assert answer["text"] == "Nobody else is online right now; the customer stays with you."
    other = await _agent(sessions, wa_tenant, "Other", recent=False)
    model.push(ScriptedResponse(content="handoff summary"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "/transfer Other", wa_id=stale.phone))
    template = sent_to(graph_sandbox[1], pid)[-1]
    assert (template["to"], template["type"]) == (other.phone, "template")
    assert template["body"]["template"] == {"name": "new_customer_waiting", "language": {"code": "pt_BR"}}
