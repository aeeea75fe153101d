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
from switchboard.handoff.pending import short_id
from switchboard.tools.toolbox import set_enabled

from tests.utils.handoff import make_agent, make_customer_conversation, reload


async def _setup(sessions, make_tenant):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    agent = await make_agent(sessions, tenant, "Nia")
    customer, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        await set_enabled(session, tenant.id, "create_lead", enabled=True)
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


# --- approvals reach a person --------------------------------------------------------------------

from datetime import timedelta  # noqa: E402

from switchboard.db.models import Outbox, utcnow  # noqa: E402
from switchboard.handoff.pending import (  # noqa: E402
    APPROVAL_NOTICE_PREFIX,
    expire_pending_actions,
    notify_pending_actions,
)


async def _ai_mode_action(sessions, make_tenant, *, online_agents=("Nia",), offline_agents=(), **action):  # type: ignore[no-untyped-def]
    """A pending action of a conversation still with the AI (nobody holds it)."""
    tenant = await make_tenant()
    agents = [await make_agent(sessions, tenant, name) for name in online_agents]
    agents += [await make_agent(sessions, tenant, name, online=False) for name in offline_agents]
    customer, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        await set_enabled(session, tenant.id, "create_lead", enabled=True)
        row = PendingAction(
            tenant_id=tenant.id,
            tool_name="create_lead",
            customer_id=customer.id,
            conversation_id=conversation.id,
            trace_id="trace-unheld",
            idempotency_key=f"k-{uuid.uuid4().hex}",
            **({"arguments": {"interest": "200 mugs", "notes": ""}} | action),
        )
        session.add(row)
    return tenant, agents, customer, conversation, row


async def _outbox(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = await session.exec(
            select(Outbox).where(Outbox.tenant_id == tenant_id).order_by(Outbox.created_at)
        )
        return list(rows.all())


async def test_an_unheld_action_notifies_every_online_agent_and_any_of_them_may_approve(
    sessions, make_tenant
):
    tenant, (nia, leo, off), _, _, action = await _ai_mode_action(
        sessions, make_tenant, online_agents=("Nia", "Leo"), offline_agents=("Off",)
    )
    assert await notify_pending_actions(sessions, tenant_id=tenant.id) == 2
    assert await notify_pending_actions(sessions, tenant_id=tenant.id) == 0  # told once
    notices = await _outbox(sessions, tenant.id)
    assert sorted(n.recipient for n in notices) == sorted([nia.phone, leo.phone])
    assert all(n.payload["text"].startswith(APPROVAL_NOTICE_PREFIX + "Ana Lima") for n in notices)
    assert f"/approve {short_id(action.id)}" in notices[0].payload["text"]
    assert short_id(action.id) in await _say(sessions, leo, "/status")
    assert "Waiting for your approval" not in await _say(sessions, off, "/status")
    assert await _say(sessions, off, f"/approve {short_id(action.id)}") == (
        f"Action {short_id(action.id)} belongs to a conversation you are not handling."
    )
    answer = await _say(sessions, leo, f"/approve {short_id(action.id)}")
    assert answer.startswith(f"Approved {short_id(action.id)}: done")
    assert [lead.interest for lead in await _leads(sessions, tenant.id)] == ["200 mugs"]


async def test_with_nobody_online_the_action_waits_until_an_agent_comes_online(sessions, make_tenant):
    tenant, (nia,), _, _, action = await _ai_mode_action(
        sessions, make_tenant, online_agents=(), offline_agents=("Nia",)
    )
    assert await notify_pending_actions(sessions, tenant_id=tenant.id) == 0
    assert (await reload(sessions, PendingAction, action.id)).notified_at is None
    answers = await run_command(
        sessions,
        None,
        agent_id=nia.id,
        command=parse_command("/online"),
        console_conversation_id=uuid.uuid4(),
        trace_id="t",
    )
    assert "1 action(s) wait for approval" in answers[0].text
    (notice,) = answers[1:]
    assert notice.recipient == nia.phone and notice.text.startswith(APPROVAL_NOTICE_PREFIX + "Ana Lima (+")
    assert "(no agent holds this conversation):" in notice.text and short_id(action.id) in notice.text
    assert (await reload(sessions, PendingAction, action.id)).notified_at is not None


async def test_the_assigned_agent_alone_is_told(sessions, make_tenant):
    tenant, agent, _, action = await _setup(sessions, make_tenant)
    await make_agent(sessions, tenant, "Other online agent")
    assert await notify_pending_actions(sessions, tenant_id=tenant.id) == 1
    (notice,) = [
        n for n in await _outbox(sessions, tenant.id) if n.payload["text"].startswith(APPROVAL_NOTICE_PREFIX)
    ]
    assert notice.recipient == agent.phone and "no agent holds" not in notice.payload["text"]


async def test_an_action_expires_after_the_tenant_setting_and_the_customer_is_told(sessions, make_tenant):
    tenant, _, customer, conversation, action = await _ai_mode_action(
        sessions, make_tenant, created_at=utcnow() - timedelta(minutes=31)
    )
    fresh = await _ai_mode_action(sessions, make_tenant, created_at=utcnow() - timedelta(minutes=31))
    async with session_scope(sessions) as session:
        from switchboard.db.models import Tenant

        row = await session.get(Tenant, tenant.id)
        row.settings_extensions = {
            "handoff": {"approval_timeout_s": 1800, "approval_expired_reply": "Too late, sorry."}
        }
        session.add(row)
    assert await expire_pending_actions(sessions) >= 1
    stored = await reload(sessions, PendingAction, action.id)
    assert (stored.status, stored.decided_by) == ("expired", "system:expiry")
    assert (await reload(sessions, PendingAction, fresh[4].id)).status == "pending"  # default timeout: 1 h
    (told,) = [o for o in await _outbox(sessions, tenant.id) if o.payload["audience"] == "customer"]
    assert (told.recipient, told.payload["text"], told.conversation_id) == (
        customer.phone,
        "Too late, sorry.",
        conversation.id,
    )
    async with sessions() as session:
        audit = (await session.exec(select(AuditLog).where(AuditLog.tenant_id == tenant.id))).all()
    assert [a.action for a in audit if a.action.startswith("pending_action")] == ["pending_action.expired"]
    assert "was already expired" in await _say(
        sessions, (await make_agent(sessions, tenant, "Late")), f"/approve {short_id(action.id)}"
    )


async def test_approve_rechecks_that_the_tool_is_still_enabled(sessions, make_tenant):
    tenant, agent, _, action = await _setup(sessions, make_tenant)
    async with session_scope(sessions) as session:
        await set_enabled(session, tenant.id, "create_lead", enabled=False)
    answer = await _say(sessions, agent, f"/approve {short_id(action.id)}")
    assert "is no longer enabled for this business, so nothing was done" in answer
    assert (await reload(sessions, PendingAction, action.id)).status == "pending"
    assert await _leads(sessions, tenant.id) == []


async def test_approve_rechecks_that_the_arguments_still_validate(sessions, make_tenant):
    tenant, agent, _, action = await _setup(sessions, make_tenant)
    async with session_scope(sessions) as session:
        row = await session.get(PendingAction, action.id)
        row.arguments = {"interest": ""}  # e.g. stored before the input model got stricter
        session.add(row)
    answer = await _say(sessions, agent, f"/approve {short_id(action.id)}")
    assert "its arguments no longer pass the tool's checks (interest:" in answer
    assert (await reload(sessions, PendingAction, action.id)).status == "pending"
    assert await _leads(sessions, tenant.id) == []
