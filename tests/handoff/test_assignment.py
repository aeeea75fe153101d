"""Assignment: least-loaded online agent, no double assignment under concurrency, the waiting queue."""

from __future__ import annotations

import asyncio
from collections import Counter

from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, HumanAgent
from switchboard.handoff import escalate, escalate_and_notify

from tests.utils.handoff import make_agent, make_customer_conversation, reload
from tests.utils.rows import outbox_of


async def test_least_loaded_online_agent_is_chosen(sessions, make_tenant):
    tenant = await make_tenant()
    busy = await make_agent(sessions, tenant, "Busy Bea", total=5, load=1)
    light = await make_agent(sessions, tenant, "Light Leo", total=2, load=2)
    await make_agent(sessions, tenant, "Offline Olga", online=False, total=0)
    _, conversation = await make_customer_conversation(sessions, tenant)

    async with session_scope(sessions) as session:
        assignment = await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="refund", actor=Actor.ai()
        )
    assert assignment.agent.id == light.id
    stored = await reload(sessions, Conversation, conversation.id)
    assert (stored.status, stored.assigned_agent_id, stored.escalation_reason) == (
        "human",
        light.id,
        "refund",
    )
    assert stored.assigned_at is not None and stored.queued_at is None
    agent = await reload(sessions, HumanAgent, light.id)
    assert (agent.total_conversations, agent.current_load, agent.active_conversation_id) == (
        3,
        3,
        conversation.id,
    )
    assert (await reload(sessions, HumanAgent, busy.id)).current_load == 1


async def test_ties_on_total_go_to_the_lower_current_load(sessions, make_tenant):
    tenant = await make_tenant()
    await make_agent(sessions, tenant, "A", total=4, load=3)
    b = await make_agent(sessions, tenant, "B", total=4, load=0)
    _, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        assignment = await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="x", actor=Actor.ai()
        )
    assert assignment.agent.id == b.id


async def test_twenty_simultaneous_escalations_spread_without_double_assignment(sessions, make_tenant):
    tenant = await make_tenant()
    agents = [await make_agent(sessions, tenant, f"Agent {i}") for i in range(3)]
    conversations = [(await make_customer_conversation(sessions, tenant))[1] for _ in range(20)]

    async def one(conversation: Conversation):  # type: ignore[no-untyped-def]
        async with session_scope(sessions) as session:
            return await escalate(
                session, tenant_id=tenant.id, conversation_id=conversation.id, reason="r", actor=Actor.ai()
            )

    results = await asyncio.gather(*(one(c) for c in conversations))
    chosen = Counter(r.agent.id for r in results)
    assert sorted(chosen.values()) == [6, 7, 7]
    stored = [await reload(sessions, Conversation, c.id) for c in conversations]
    per_agent = Counter(c.assigned_agent_id for c in stored)
    assert per_agent == chosen
    for agent in agents:
        row = await reload(sessions, HumanAgent, agent.id)
        assert row.total_conversations == row.current_load == per_agent[agent.id]


async def test_no_agent_online_queues_in_order(sessions, make_tenant):
    tenant = await make_tenant()
    await make_agent(sessions, tenant, "Away", online=False)
    first = (await make_customer_conversation(sessions, tenant))[1]
    second = (await make_customer_conversation(sessions, tenant))[1]
    positions = []
    for conversation in (first, second):
        async with session_scope(sessions) as session:
            assignment = await escalate(
                session, tenant_id=tenant.id, conversation_id=conversation.id, reason="r", actor=Actor.ai()
            )
        assert assignment.agent is None
        positions.append(assignment.queue_position)
    assert positions == [1, 2]
    stored = await reload(sessions, Conversation, first.id)
    assert stored.status == "human" and stored.queued_at is not None and stored.assigned_agent_id is None


async def test_second_escalation_keeps_the_agent(sessions, make_tenant):
    tenant = await make_tenant()
    a = await make_agent(sessions, tenant, "A")
    await make_agent(sessions, tenant, "B")
    _, conversation = await make_customer_conversation(sessions, tenant)
    for reason in ("first", "second"):
        async with session_scope(sessions) as session:
            assignment = await escalate(
                session, tenant_id=tenant.id, conversation_id=conversation.id, reason=reason, actor=Actor.ai()
            )
        assert assignment.agent.id == a.id
    assert (await reload(sessions, HumanAgent, a.id)).total_conversations == 1


async def test_notice_without_gateway_quotes_the_customer(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    customer, conversation = await make_customer_conversation(sessions, tenant, name="Rui")
    await escalate_and_notify(
        sessions,
        None,
        actor=Actor.ai(),
        tenant_id=tenant.id,
        conversation_id=conversation.id,
        reason="wants a person",
        trace_id="t1",
    )
    rows = await outbox_of(sessions, tenant.id)
    assert [(r.recipient, r.payload["audience"]) for r in rows] == [(agent.phone, "agent")]
    text = rows[0].payload["text"]
    assert f"Customer: Rui (+{customer.phone})" in text
    assert "Reason: wants a person" in text
    assert "Summary: Customer: My order never arrived" in text
    assert rows[0].conversation_id == conversation.id and rows[0].status == "pending"


async def test_two_escalations_at_once_notify_the_agent_once(sessions, make_tenant):
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    _, conversation = await make_customer_conversation(sessions, tenant, name="Rui")

    async def ask(reason: str):  # type: ignore[no-untyped-def]
        return await escalate_and_notify(
            sessions,
            None,
            actor=Actor.ai(),
            tenant_id=tenant.id,
            conversation_id=conversation.id,
            reason=reason,
            trace_id=f"t-{reason}",
        )

    first, second = await asyncio.gather(ask("refund"), ask("angry"))
    assert (first.agent.id, second.agent.id) == (agent.id, agent.id)
    assert sorted([first.newly_assigned, second.newly_assigned]) == [False, True]
    rows = await outbox_of(sessions, tenant.id)
    assert [(r.recipient, r.payload["audience"]) for r in rows] == [(agent.phone, "agent")]
    assert (await reload(sessions, HumanAgent, agent.id)).current_load == 1
