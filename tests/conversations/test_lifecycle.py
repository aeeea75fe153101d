"""Conversation lifecycle: every transition is written by the core and recorded as an event, and a
conversation in human mode always has an agent, a place in the queue, or is an agent's console."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import select
from switchboard.agent.builtin_tools import BuiltinToolSet
from switchboard.agent.tools import ToolContext, ToolError
from switchboard.conversations import (
    Actor,
    Identity,
    InvalidTransition,
    back_to_ai,
    close,
    open_conversation,
    resolve_customer,
    to_agent_console,
)
from switchboard.db.engine import session_scope
from switchboard.db.models import ChannelAccount, Conversation, Message, utcnow
from switchboard.handoff import escalate_and_notify, parse_command, run_command
from switchboard.memory import close_idle_conversations

from tests.utils.conversations import assert_human_mode_has_owner, event_rows
from tests.utils.handoff import make_agent, make_customer_conversation, reload
from tests.utils.tenants import new_tenant


async def _command(sessions, agent, text: str) -> None:  # type: ignore[no-untyped-def]
    await run_command(
        sessions,
        None,
        agent_id=agent.id,
        command=parse_command(text),
        console_conversation_id=uuid.uuid4(),
        trace_id="trace-cmd",
    )


def _ctx(sessions, customer, conversation) -> ToolContext:  # type: ignore[no-untyped-def]
    return ToolContext(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.id,
        customer_id=customer.id,
        trace_id="trace-tool",
        call_id="call-1",
        idempotency_key="k",
        sessions=sessions,
    )


async def test_every_transition_path_is_recorded_and_keeps_human_mode_owned(scratch_database) -> None:  # type: ignore[no-untyped-def]
    sessions = (
        scratch_database.sessions
    )  # closing idle conversations scans every tenant: only this test's here
    tenant = await new_tenant(sessions, memory={"inactivity_close_s": 60})
    nia = await make_agent(sessions, tenant, "Nia")
    leo = await make_agent(sessions, tenant, "Leo")
    customer, conversation = await make_customer_conversation(sessions, tenant)
    check = lambda: assert_human_mode_has_owner(sessions, tenant.id)  # noqa: E731

    async def escalate(actor: Actor, reason: str):  # type: ignore[no-untyped-def]
        return await escalate_and_notify(
            sessions,
            None,
            tenant_id=tenant.id,
            conversation_id=conversation.id,
            reason=reason,
            trace_id="trace-esc",
            actor=actor,
        )

    assert (await escalate(Actor.ai(), "wants a refund")).agent.id == nia.id  # oldest of the two idle agents
    await check()
    await _command(sessions, nia, "/transfer Leo")
    await check()
    await _command(sessions, leo, "/end")
    await check()
    await _command(sessions, nia, "/offline")
    await _command(sessions, leo, "/offline")
    assert (await escalate(Actor.customer(customer.id), "customer pressed Talk to a person")).agent is None
    await check()
    await _command(sessions, nia, "/online")  # takes the queue
    await check()
    await _command(sessions, nia, "/end")
    await check()
    async with session_scope(sessions) as session:
        for message in (
            await session.exec(select(Message).where(Message.conversation_id == conversation.id))
        ).all():
            message.created_at = utcnow() - timedelta(minutes=5)
            session.add(message)
    assert await close_idle_conversations(sessions, now=utcnow()) == [conversation.id]
    await check()

    assert await event_rows(sessions, tenant.id, conversation.id) == [
        (None, "ai", None, "customer", str(customer.id), None),
        ("ai", "human", nia.id, "ai", None, "wants a refund"),
        ("human", "human", leo.id, "agent", str(nia.id), "transferred from Nia to Leo"),
        ("human", "ai", None, "agent", str(leo.id), "/end"),
        ("ai", "human", None, "customer", str(customer.id), "customer pressed Talk to a person"),
        ("human", "human", nia.id, "agent", str(nia.id), "taken from the queue by Nia"),
        ("human", "ai", None, "agent", str(nia.id), "/end"),
        ("ai", "closed", None, "system", None, "no messages for 60 s"),
    ]
    stored = await reload(sessions, Conversation, conversation.id)
    assert (stored.status, stored.assigned_agent_id, stored.queued_at, stored.escalation_reason) == (
        "closed",
        None,
        None,
        None,
    )
    assert stored.closed_at is not None


async def test_a_second_escalation_keeps_the_agent_and_records_nothing_new(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    nia = await make_agent(sessions, tenant, "Nia")
    _, conversation = await make_customer_conversation(sessions, tenant)
    for reason in ("first", "second"):
        assignment = await escalate_and_notify(
            sessions,
            None,
            tenant_id=tenant.id,
            conversation_id=conversation.id,
            reason=reason,
            trace_id="t",
            actor=Actor.ai(),
        )
        assert assignment.agent.id == nia.id
    assert [row[:4] for row in await event_rows(sessions, tenant.id, conversation.id)] == [
        (None, "ai", None, "customer"),
        ("ai", "human", nia.id, "ai"),
    ]
    assert (await reload(sessions, Conversation, conversation.id)).escalation_reason == "second"
    await assert_human_mode_has_owner(sessions, tenant.id)


async def test_the_database_refuses_human_mode_without_an_owner(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    _, conversation = await make_customer_conversation(sessions, tenant)
    with pytest.raises(IntegrityError, match="ck_conversations_human_has_owner"):
        async with session_scope(sessions) as session:
            await session.exec(
                update(Conversation).where(Conversation.id == conversation.id).values(status="human")
            )
    assert (await reload(sessions, Conversation, conversation.id)).status == "ai"


async def test_end_conversation_closes_with_an_event_but_not_while_a_person_handles_it(
    sessions, make_tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    customer, open_one = await make_customer_conversation(sessions, tenant)
    tools = BuiltinToolSet()
    output = await tools.call(
        "end_conversation", {"reason": "thanks, bye", "farewell": False}, _ctx(sessions, customer, open_one)
    )
    assert output.effect == "closed_silent"
    assert (await event_rows(sessions, tenant.id, open_one.id))[-1] == (
        "ai",
        "closed",
        None,
        "ai",
        None,
        "thanks, bye",
    )
    again = await tools.call("end_conversation", {"farewell": False}, _ctx(sessions, customer, open_one))
    assert again.effect == "closed_silent" and len(await event_rows(sessions, tenant.id, open_one.id)) == 2

    customer, handed = await make_customer_conversation(sessions, tenant)
    await make_agent(sessions, tenant, "Nia")
    await escalate_and_notify(
        sessions,
        None,
        tenant_id=tenant.id,
        conversation_id=handed.id,
        reason="r",
        trace_id="t",
        actor=Actor.ai(),
    )
    with pytest.raises(ToolError) as refused:
        await tools.call("end_conversation", {}, _ctx(sessions, customer, handed))
    assert refused.value.error_type == "conflict"
    assert (await reload(sessions, Conversation, handed.id)).status == "human"
    await assert_human_mode_has_owner(sessions, tenant.id)


async def test_transitions_from_the_wrong_status_are_refused(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    _, conversation = await make_customer_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        stored = await session.get(Conversation, conversation.id)
        with pytest.raises(InvalidTransition):
            await back_to_ai(session, stored, actor=Actor.system())
        await close(session, stored, actor=Actor.system(), reason="done")
    async with sessions() as session, session.begin():
        stored = await session.get(Conversation, conversation.id)
        with pytest.raises(InvalidTransition):
            await to_agent_console(session, stored, agent_id=uuid.uuid4(), reason="x")
        assert await close(session, stored, actor=Actor.system()) is None  # already closed: nothing recorded


async def test_an_agents_console_is_human_mode_without_an_agent_and_never_handed_to_the_ai(
    sessions, make_tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    nia = await make_agent(sessions, tenant, "Nia")
    async with sessions() as session, session.begin():
        me = (
            await resolve_customer(
                session, tenant_id=tenant.id, identities=[Identity("whatsapp", "wa_id", nia.phone)]
            )
        ).customer
        console = await open_conversation(session, customer=me, channel_account_id=None)
        event = await to_agent_console(session, console, agent_id=nia.id, reason="console", trace_id="t")
        assert event is not None and (event.from_status, event.to_status, event.actor_id) == (
            "ai",
            "human",
            str(nia.id),
        )
        assert await to_agent_console(session, console, agent_id=nia.id, reason="console") is None
        with pytest.raises(InvalidTransition):
            await back_to_ai(session, console, actor=Actor.agent(nia.id))
    stored = await reload(sessions, Conversation, console.id)
    assert (stored.status, stored.is_agent_console, stored.assigned_agent_id, stored.queued_at) == (
        "human",
        True,
        None,
        None,
    )
    await assert_human_mode_has_owner(sessions, tenant.id)


async def test_open_conversation_is_one_per_customer_and_business_number(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        first, second = (
            ChannelAccount(tenant_id=tenant.id, channel="whatsapp", external_account_id=uuid.uuid4().hex)
            for _ in range(2)
        )
        session.add_all([first, second])
        customer = (
            await resolve_customer(
                session, tenant_id=tenant.id, identities=[Identity("whatsapp", "wa_id", "15550003001")]
            )
        ).customer
        on_first = await open_conversation(session, customer=customer, channel_account_id=first.id)
        again = await open_conversation(session, customer=customer, channel_account_id=first.id)
        on_second = await open_conversation(session, customer=customer, channel_account_id=second.id)
    assert again.id == on_first.id and on_second.id != on_first.id
    assert (on_first.channel_account_id, on_second.channel_account_id) == (first.id, second.id)
