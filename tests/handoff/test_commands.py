"""Slash commands: parsing (case, unknown, bad arguments) and each command's effect on the database."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import col, select
from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, HumanAgent, Message, Outbox
from switchboard.handoff import (
    HANDED_BACK_NOTE,
    HELP_TEXT,
    Command,
    CommandError,
    escalate,
    parse_command,
    run_command,
    selected_conversation,
)
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import deployment, llm_settings, unique_model
from tests.utils.handoff import make_agent, make_customer_conversation, reload

# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/status", Command("status")),
        ("/STATUS", Command("status")),
        ("  /Help ", Command("help")),
        ("/switch 2", Command("switch", "2", 2)),
        ("/Transfer Maria Silva", Command("transfer", "Maria Silva")),
        ("/transfer", Command("transfer")),
        ("hello there", None),
        ("//not a command", None),
        ("/", None),
    ],
)
def test_parse_command(text, expected):
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("/frobnicate", "Unknown command /frobnicate."),
        ("/switch", "/switch needs a number"),
        ("/switch two", "/switch needs a number"),
        ("/switch 0", "/switch needs a number"),
        ("/end now", "/end takes no arguments"),
        ("/online please", "/online takes no arguments"),
    ],
)
def test_bad_commands_get_help(text, fragment):
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert fragment in str(info.value)
    if "Unknown" in fragment:
        assert HELP_TEXT in str(info.value)


# --- effects --------------------------------------------------------------------------------------


async def _assign(sessions, tenant, conversation):  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        return await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="help", actor=Actor.ai()
        )


async def _run(sessions, agent, text, gateway=None):  # type: ignore[no-untyped-def]
    return await run_command(
        sessions,
        gateway,
        agent_id=agent.id,
        command=parse_command(text),
        console_conversation_id=uuid.uuid4(),
        trace_id="trace-cmd",
    )


async def test_help_and_status(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    c1, conv1 = await make_customer_conversation(sessions, tenant, name="First")
    c2, conv2 = await make_customer_conversation(sessions, tenant, name=None)
    await _assign(sessions, tenant, conv1)
    await _assign(sessions, tenant, conv2)
    [help_reply] = await _run(sessions, agent, "/help")
    assert help_reply.text == HELP_TEXT and help_reply.recipient == agent.phone
    [status] = await _run(sessions, agent, "/STATUS")
    lines = status.text.splitlines()
    assert lines[0] == "You are online. Open conversations: 2."
    assert lines[1].startswith(f"1. First (+{c1.phone}), since ")
    assert lines[2].startswith(f"2. +{c2.phone}, since ") and lines[2].endswith("<- current")
    assert lines[3] == "Waiting for an agent: 0."


async def test_switch_selects_and_rejects_out_of_range(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    _, conv1 = await make_customer_conversation(sessions, tenant, name="First")
    _, conv2 = await make_customer_conversation(sessions, tenant, name="Second")
    await _assign(sessions, tenant, conv1)
    await _assign(sessions, tenant, conv2)
    [reply] = await _run(sessions, agent, "/switch 1")
    assert reply.text.startswith("Now talking to First")
    assert (await reload(sessions, HumanAgent, agent.id)).active_conversation_id == conv1.id
    [reply] = await _run(sessions, agent, "/switch 3")
    assert reply.text == "There is no conversation 3: you have 2 (see /status)."
    assert (await reload(sessions, HumanAgent, agent.id)).active_conversation_id == conv1.id


async def test_reply_context_selects_the_conversation(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    _, conv1 = await make_customer_conversation(sessions, tenant)
    _, conv2 = await make_customer_conversation(sessions, tenant)
    await _assign(sessions, tenant, conv1)
    await _assign(sessions, tenant, conv2)
    async with session_scope(sessions) as session:
        session.add(
            Outbox(
                tenant_id=tenant.id,
                conversation_id=conv1.id,
                channel="whatsapp",
                recipient=agent.phone,
                status="sent",
                external_id="wamid.relayed-1",
            )
        )
    async with session_scope(sessions) as session:
        row = await session.get(HumanAgent, agent.id)
        assert (await selected_conversation(session, row)).id == conv2.id
        chosen = await selected_conversation(session, row, reply_to_external_id="wamid.relayed-1")
        assert chosen.id == conv1.id
    assert (await reload(sessions, HumanAgent, agent.id)).active_conversation_id == conv1.id


async def test_end_returns_to_the_ai_and_leaves_a_note(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    customer, conversation = await make_customer_conversation(sessions, tenant, name="Ana")
    await _assign(sessions, tenant, conversation)
    [reply] = await _run(sessions, agent, "/end")
    assert reply.text == f"Ana (+{customer.phone}) is back with the AI assistant."
    stored = await reload(sessions, Conversation, conversation.id)
    assert (stored.status, stored.assigned_agent_id) == ("ai", None)
    row = await reload(sessions, HumanAgent, agent.id)
    assert (row.current_load, row.total_conversations, row.active_conversation_id) == (0, 1, None)
    async with sessions() as session:
        note = (
            await session.exec(
                select(Message).where(
                    Message.conversation_id == conversation.id, Message.role == "human_agent"
                )
            )
        ).one()
    assert note.text == HANDED_BACK_NOTE and note.proxy_metadata["event"] == "handed_back"
    [again] = await _run(sessions, agent, "/end")
    assert again.text == "You have no open conversation."


async def test_end_asks_to_switch_when_several_and_none_selected(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    for _ in range(2):
        await _assign(sessions, tenant, (await make_customer_conversation(sessions, tenant))[1])
    async with session_scope(sessions) as session:
        row = await session.get(HumanAgent, agent.id)
        row.active_conversation_id = None
    [reply] = await _run(sessions, agent, "/end")
    assert reply.text == "You have 2 open conversations: choose one with /switch N first."


async def test_offline_with_open_conversations_asks_to_transfer_first(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    await _assign(sessions, tenant, (await make_customer_conversation(sessions, tenant))[1])
    [reply] = await _run(sessions, agent, "/offline")
    assert reply.text.startswith("You still have 1 open conversation(s). Hand them over first with /transfer")
    assert (await reload(sessions, HumanAgent, agent.id)).status == "online"
    await _run(sessions, agent, "/end")
    [reply] = await _run(sessions, agent, "/offline")
    assert reply.text == "You are offline. Send /online when you are back."
    assert (await reload(sessions, HumanAgent, agent.id)).status == "offline"


async def test_queued_conversations_go_to_the_next_agent_online(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia", online=False)
    _, first = await make_customer_conversation(sessions, tenant, name="Early", texts=("where is my parcel",))
    _, second = await make_customer_conversation(sessions, tenant, name="Late")
    for conversation in (first, second):
        assignment = await _assign(sessions, tenant, conversation)
        assert assignment.agent is None
    answer, notice1, notice2 = await _run(sessions, agent, "/online")
    assert answer.text == "You are online. 2 waiting conversation(s) are now yours."
    assert notice1.conversation_id == first.id and notice2.conversation_id == second.id
    assert "Customer: Early" in notice1.text and "Summary: Customer: where is my parcel" in notice1.text
    for conversation in (first, second):
        stored = await reload(sessions, Conversation, conversation.id)
        assert (stored.assigned_agent_id, stored.queued_at) == (agent.id, None)
    row = await reload(sessions, HumanAgent, agent.id)
    assert (row.status, row.current_load, row.total_conversations) == ("online", 2, 2)
    [again] = await _run(sessions, agent, "/online")
    assert again.text == "You are online. Nobody is waiting."


async def test_transfer_to_least_loaded_with_llm_summary(sessions, make_tenant, offline_model, gateway):
    state, url = offline_model
    model = unique_model()
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)))
    state.script(model).push(ScriptedResponse(content="Customer needs an invoice copy."))
    nia = await make_agent(sessions, tenant, "Nia")
    _, conversation = await make_customer_conversation(sessions, tenant, name="Ana")
    await _assign(sessions, tenant, conversation)
    await make_agent(sessions, tenant, "Busy Bo", total=10)
    leo = await make_agent(sessions, tenant, "Leo", total=3)
    answer, notice = await _run(sessions, nia, "/transfer", gateway)
    assert answer.text.endswith("is now with Leo.")
    assert notice.recipient == leo.phone
    assert notice.text.startswith("Transferred to you by Nia.")
    assert "Summary: Customer needs an invoice copy." in notice.text
    stored = await reload(sessions, Conversation, conversation.id)
    assert stored.assigned_agent_id == leo.id
    assert (await reload(sessions, HumanAgent, nia.id)).current_load == 0
    leo_row = await reload(sessions, HumanAgent, leo.id)
    assert (leo_row.current_load, leo_row.total_conversations, leo_row.active_conversation_id) == (
        1,
        4,
        conversation.id,
    )


async def test_transfer_by_name_or_phone_and_its_errors(sessions, make_tenant):
    tenant = await make_tenant()
    nia = await make_agent(sessions, tenant, "Nia")
    maria = await make_agent(sessions, tenant, "Maria Silva", total=50)
    off = await make_agent(sessions, tenant, "Otto", online=False)
    [reply] = await _run(sessions, nia, "/transfer Maria")
    assert reply.text == "You have no open conversation to transfer."
    _, conversation = await make_customer_conversation(sessions, tenant)
    await _assign(sessions, tenant, conversation)
    [reply] = await _run(sessions, nia, "/transfer Zed")
    assert reply.text.startswith("No colleague named or numbered 'Zed'.")
    [reply] = await _run(sessions, nia, "/transfer otto")
    assert reply.text == "Otto is offline. Choose someone online, or send /transfer alone."
    [reply] = await _run(sessions, nia, "/transfer Nia")
    assert reply.text.startswith("That is you.")
    assert (await reload(sessions, Conversation, conversation.id)).assigned_agent_id == nia.id
    answer, notice = await _run(sessions, nia, f"/transfer +{maria.phone}")
    assert answer.text.endswith("is now with Maria Silva.") and notice.recipient == maria.phone
    assert (await reload(sessions, Conversation, conversation.id)).assigned_agent_id == maria.id
    # the refused transfers changed nobody: Otto stays offline with nothing, Maria has her one more
    otto, maria_row = await reload(sessions, HumanAgent, off.id), await reload(sessions, HumanAgent, maria.id)
    assert (otto.status, otto.current_load, otto.total_conversations) == ("offline", 0, 0)
    assert (maria_row.current_load, maria_row.total_conversations) == (1, 51)


async def test_transfer_with_nobody_else_online(sessions, make_tenant):
    tenant = await make_tenant()
    nia = await make_agent(sessions, tenant, "Nia")
    await _assign(sessions, tenant, (await make_customer_conversation(sessions, tenant))[1])
    [reply] = await _run(sessions, nia, "/transfer")
    assert reply.text == "Nobody else is online right now; the customer stays with you."


async def test_messages_stay_ordered(sessions, make_tenant):
    """Outgoing of a command list the agent's answer first."""
    tenant = await make_tenant()
    nia = await make_agent(sessions, tenant, "Nia", online=False)
    await _assign(sessions, tenant, (await make_customer_conversation(sessions, tenant))[1])
    out = await _run(sessions, nia, "/online")
    assert [o.audience for o in out] == ["agent", "agent"]
    assert out[0].text.startswith("You are online.")
    async with sessions() as session:
        count = len((await session.exec(select(Message.id).where(col(Message.tenant_id) == tenant.id))).all())
    assert count == 1
