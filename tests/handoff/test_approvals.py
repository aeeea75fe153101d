"""/approve and /reject: the assigned agent decides pending tool actions, exactly once."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlmodel import select
from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import AuditLog, Lead, PendingAction
from switchboard.handoff import CommandError, escalate, parse_command, run_command
from switchboard.handoff.approvals import short_id

from tests.utils.handoff import make_agent, make_customer_conversation, reload


async def _setup(sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    customer, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="approval", actor=Actor.ai()
        )
    async with session_scope(sessions) as session:
        action = PendingAction(
            tenant_id=tenant.id,
            tool_name="create_lead",
            arguments={"interest": "bulk order of 200 mugs", "notes": ""},
            customer_id=customer.id,
            conversation_id=conversation.id,
            trace_id="trace-approval",
            idempotency_key=f"k-{uuid.uuid4().hex}",
        )
        session.add(action)
    return tenant, agent, conversation, action


async def _say(sessions, agent, text):  # type: ignore[no-untyped-def]
    [answer] = await run_command(
        sessions,
        None,
        agent_id=agent.id,
        command=parse_command(text),
        console_conversation_id=uuid.uuid4(),
        trace_id="t",
    )
    return answer.text


async def _leads(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list((await session.exec(select(Lead).where(Lead.tenant_id == tenant_id))).all())


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("/approve", "/approve needs the action id"),
        ("/approve abc def", "/approve needs the action id"),
        ("/reject", "/reject needs"),
    ],
)
def test_approval_commands_need_an_id(text, fragment):
    with pytest.raises(CommandError, match=fragment):
        parse_command(text)


async def test_status_lists_pending_and_approve_runs_the_tool_once(sessions, make_tenant):
    tenant, agent, conversation, action = await _setup(sessions, make_tenant)
    status = await _say(sessions, agent, "/status")
    assert f"{short_id(action.id)} create_lead " in status and "bulk order of 200 mugs" in status
    answers = await asyncio.gather(
        _say(sessions, agent, f"/APPROVE {short_id(action.id)}"),
        _say(sessions, agent, f"/approve {action.id}"),
    )
    ref = short_id(action.id)
    assert sorted(answers) == sorted(
        [
            f"Approved {ref}: done (lead recorded; a salesperson will follow up).",
            f"Action {ref} was already approved.",
        ]
    )
    leads = await _leads(sessions, tenant.id)
    assert [(lead.interest, lead.conversation_id) for lead in leads] == [
        ("bulk order of 200 mugs", conversation.id)
    ]
    stored = await reload(sessions, PendingAction, action.id)
    assert (stored.status, stored.decided_by) == ("approved", f"human_agent:{agent.id}")
    async with sessions() as session:
        audit = (
            await session.exec(
                select(AuditLog).where(AuditLog.tenant_id == tenant.id, AuditLog.actor == "human_agent")
            )
        ).one()
    assert audit.action == "pending_action.approved" and audit.target_id == str(action.id)
    assert "Waiting for your approval" not in await _say(sessions, agent, "/status")


async def test_reject_discards_and_cannot_be_approved_later(sessions, make_tenant):
    tenant, agent, _, action = await _setup(sessions, make_tenant)
    answer = await _say(sessions, agent, f"/reject {short_id(action.id)} customer changed their mind")
    assert answer == f"Rejected {short_id(action.id)}: customer changed their mind."
    assert (
        await _say(sessions, agent, f"/approve {short_id(action.id)}")
        == f"Action {short_id(action.id)} was already rejected."
    )
    assert await _leads(sessions, tenant.id) == []
    assert (await reload(sessions, PendingAction, action.id)).status == "rejected"


async def test_wrong_ids_and_other_agents_conversations_are_refused(sessions, make_tenant):
    tenant, agent, _, action = await _setup(sessions, make_tenant)
    other = await make_agent(sessions, tenant, "Leo")
    assert (
        await _say(sessions, agent, "/approve zz")
        == "zz is not an action id: use the 8 characters /status shows."
    )
    assert await _say(sessions, agent, "/approve 00000000") == "No action 00000000 waiting for you."
    refused = await _say(sessions, other, f"/approve {short_id(action.id)}")
    assert refused == f"Action {short_id(action.id)} belongs to a conversation you are not handling."
    assert (await reload(sessions, PendingAction, action.id)).status == "pending"
    assert await _leads(sessions, tenant.id) == []
