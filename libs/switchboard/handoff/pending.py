"""Pending actions reach a person (docs/tools.md#approvals): who is told, who may decide, and expiry.

A write whose policy needs a person becomes a ``pending_actions`` row (the tool server's
:func:`switchboard.tools.business.request_approval`) and the customer is told "we will confirm".
From then on:

* **who is told** (:func:`pending_action_notices`): the agent the conversation is assigned to (in
  human mode); else every *online* agent of the tenant; else nobody yet: the action waits, with its
  conversation, until an agent goes ``/online`` (which collects every waiting action) or the
  conversation is assigned. ``notified_at`` records the notice; the approvals sweep retries the ones
  nobody was told about.
* **who may decide** (:func:`may_decide`): the assigned agent; for a conversation no agent holds,
  any online agent of the tenant.
* **expiry** (:func:`expire_pending_actions`): an action still pending after the tenant's
  ``handoff.approval_timeout_s`` becomes ``expired`` (an ``audit_logs`` row, actor ``system``) and
  the customer gets ``handoff.approval_expired_reply`` on their own channel.

The approvals sweep (:func:`approvals_sweep`, an ARQ cron job on the chat worker) runs both; the MCP
tool source also notifies right after a call created an action, so the agent does not wait for it.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, or_, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.engine import session_scope
from switchboard.db.models import (
    AgentStatus,
    AuditLog,
    Conversation,
    ConversationStatus,
    Customer,
    HumanAgent,
    OutboxPurpose,
    PendingAction,
    PendingActionStatus,
    utcnow,
)
from switchboard.events import stage_event
from switchboard.handoff.notices import (
    Outgoing,
    agent_outgoing,
    customer_address,
    customer_label,
    write_outgoing,
)
from switchboard.observability import get_logger
from switchboard.tenant_settings import load_tenant_settings

__all__ = [
    "APPROVAL_NOTICE_PREFIX",
    "approval_notice",
    "approvals_sweep",
    "describe",
    "expire_pending_actions",
    "may_decide",
    "short_id",
    "notify_pending_actions",
    "pending_action_notices",
    "visible_pending_actions",
]

log = get_logger(__name__)

APPROVAL_NOTICE_PREFIX = "Approval needed for "
"""How every approval notice starts (agents and tests recognise it)."""
SWEEP_BATCH = 200
"""Actions one sweep handles at most per step (oldest first); the next sweep takes the rest."""
MIN_APPROVAL_TIMEOUT_S = 60.0
"""The smallest ``approval_timeout_s`` a tenant may set: younger actions are never candidates to expire."""


def stage_approval_requested(session: AsyncSession, action: PendingAction) -> None:
    """``approval.requested`` for the tenant's systems (:mod:`switchboard.events`), in the transaction
    that creates the pending action (the tool server's ``request_approval``)."""
    stage_event(
        session,
        tenant_id=action.tenant_id,
        event_type="approval.requested",
        data={
            "pending_action_id": action.id,
            "tool_name": action.tool_name,
            "conversation_id": action.conversation_id,
            "customer_id": action.customer_id,
        },
    )


def short_id(action_id: uuid.UUID) -> str:
    """First 8 hex characters: how agents see and type a pending action's id."""
    return action_id.hex[:8]


def describe(action: PendingAction) -> str:
    """``a1b2c3d4 create_lead {"interest": "bulk order"}`` (arguments cut to 200 characters)."""
    args = json.dumps(action.arguments, ensure_ascii=False, sort_keys=True)
    return f"{short_id(action.id)} {action.tool_name} {args[:200]}"


def approval_notice(action: PendingAction, customer: Customer | None, *, assigned: bool) -> str:
    """The text an agent receives about a pending action."""
    who = customer_label(customer) if customer is not None else "a customer"
    lines = [
        f"{APPROVAL_NOTICE_PREFIX}{who}" + ("" if assigned else " (no agent holds this conversation)") + ":",
        describe(action),
        f"/approve {short_id(action.id)} runs it, /reject {short_id(action.id)} reason refuses it.",
    ]
    return "\n".join(lines)


def may_decide(agent: HumanAgent, conversation: Conversation | None) -> bool:
    """Whether ``agent`` may approve or reject an action of ``conversation``."""
    if conversation is None or conversation.tenant_id != agent.tenant_id:
        return False
    if conversation.assigned_agent_id is not None:
        return conversation.assigned_agent_id == agent.id
    return agent.status == AgentStatus.online.value


async def visible_pending_actions(session: AsyncSession, agent: HumanAgent) -> list[PendingAction]:
    """Pending actions the agent may decide (their conversations'; if online, also those of
    conversations no agent holds), oldest first."""
    mine = (col(Conversation.assigned_agent_id) == agent.id) & (
        col(Conversation.status) == ConversationStatus.human.value
    )
    unheld = col(Conversation.assigned_agent_id).is_(None)
    condition = or_(mine, unheld) if agent.status == AgentStatus.online.value else mine
    rows = await session.exec(
        select(PendingAction)
        .join(Conversation, col(Conversation.id) == PendingAction.conversation_id)
        .where(
            PendingAction.tenant_id == agent.tenant_id,
            PendingAction.status == PendingActionStatus.pending.value,
            condition,
        )
        .order_by(col(PendingAction.created_at))
    )
    return list(rows.all())


async def pending_action_notices(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    action_ids: list[uuid.UUID] | None = None,
    include_notified: bool = False,
) -> list[Outgoing]:
    """Notices for the tenant's pending actions nobody was told about (or ``action_ids`` only), marking
    them ``notified_at`` when someone was (see the module docstring for who). Rows are locked
    (``SKIP LOCKED``), so two sweeps never notify twice.

    Args:
        include_notified: also actions already notified (an agent who just came online gets them all).
    """
    query = select(PendingAction).where(
        PendingAction.tenant_id == tenant_id, PendingAction.status == PendingActionStatus.pending.value
    )
    if action_ids is not None:
        query = query.where(col(PendingAction.id).in_(action_ids))
    if not include_notified:
        query = query.where(col(PendingAction.notified_at).is_(None))
    actions = list(
        (
            await session.exec(
                query.order_by(col(PendingAction.created_at))
                .limit(SWEEP_BATCH)
                .with_for_update(skip_locked=True)
            )
        ).all()
    )
    if not actions:
        return []
    online = list(
        (
            await session.exec(
                select(HumanAgent)
                .where(HumanAgent.tenant_id == tenant_id, HumanAgent.status == AgentStatus.online.value)
                .order_by(col(HumanAgent.created_at))
            )
        ).all()
    )
    out: list[Outgoing] = []
    for action in actions:
        conversation = (
            await session.get(Conversation, action.conversation_id) if action.conversation_id else None
        )
        customer = await session.get(Customer, action.customer_id) if action.customer_id else None
        if conversation is not None and conversation.assigned_agent_id is not None:
            agent = await session.get(HumanAgent, conversation.assigned_agent_id)
            recipients = [agent] if agent is not None else []
            assigned = True
        else:
            recipients, assigned = online, False
        if not recipients or conversation is None:
            log.info("pending_action_waits", tenant_id=str(tenant_id), pending_action_id=str(action.id))
            continue
        text = approval_notice(action, customer, assigned=assigned)
        out.extend(agent_outgoing(agent, text, conversation.id) for agent in recipients)
        action.notified_at = utcnow()
        session.add(action)
        log.info(
            "pending_action_notified",
            tenant_id=str(tenant_id),
            pending_action_id=str(action.id),
            agents=[str(a.id) for a in recipients],
            assigned=assigned,
        )
    return out


async def notify_pending_actions(
    sessions: async_sessionmaker[AsyncSession],
    *,
    tenant_id: uuid.UUID,
    action_ids: list[uuid.UUID] | None = None,
    trace_id: str | None = None,
) -> int:
    """Write the notices of :func:`pending_action_notices` through the outbox in one transaction.

    Returns:
        Notices written.
    """
    async with session_scope(sessions) as session:
        items = await pending_action_notices(session, tenant_id=tenant_id, action_ids=action_ids)
        if items:
            await write_outgoing(session, tenant_id=tenant_id, items=items, trace_id=trace_id)
    return len(items)


async def expire_pending_actions(sessions: async_sessionmaker[AsyncSession]) -> int:
    """Expire actions pending longer than their tenant's ``handoff.approval_timeout_s`` and tell the
    customers (one transaction per action).

    Returns:
        Actions expired.
    """
    cutoff = utcnow() - timedelta(seconds=MIN_APPROVAL_TIMEOUT_S)
    async with sessions() as session:
        candidates = list(
            (
                await session.exec(
                    select(PendingAction.id, PendingAction.tenant_id, PendingAction.created_at)
                    .where(
                        PendingAction.status == PendingActionStatus.pending.value,
                        PendingAction.created_at < cutoff,
                    )
                    .order_by(col(PendingAction.created_at))
                    .limit(SWEEP_BATCH)
                )
            ).all()
        )
    timeouts: dict[uuid.UUID, Any] = {}
    expired = 0
    for action_id, tenant_id, created_at in candidates:
        async with session_scope(sessions) as session:
            if tenant_id not in timeouts:
                timeouts[tenant_id] = (await load_tenant_settings(session, tenant_id)).handoff
            handoff = timeouts[tenant_id]
            if created_at > utcnow() - timedelta(seconds=handoff.approval_timeout_s):
                continue
            action = (
                await session.exec(
                    select(PendingAction)
                    .where(
                        PendingAction.id == action_id,
                        PendingAction.status == PendingActionStatus.pending.value,
                    )
                    .with_for_update(skip_locked=True)
                )
            ).first()
            if action is None:  # decided meanwhile, or another sweep holds it
                continue
            action.status = PendingActionStatus.expired.value
            action.decided_by = "system:expiry"
            action.decided_at = utcnow()
            session.add(action)
            session.add(
                AuditLog(
                    tenant_id=tenant_id,
                    actor="system",
                    action="pending_action.expired",
                    target_type="pending_action",
                    target_id=str(action.id),
                    details={"tool_name": action.tool_name, "approval_timeout_s": handoff.approval_timeout_s},
                    trace_id=action.trace_id,
                )
            )
            conversation = (
                await session.get(Conversation, action.conversation_id) if action.conversation_id else None
            )
            customer = await session.get(Customer, action.customer_id) if action.customer_id else None
            if conversation is not None and customer is not None:
                await write_outgoing(
                    session,
                    tenant_id=tenant_id,
                    items=[
                        Outgoing(
                            "customer",
                            customer_address(customer),
                            handoff.approval_expired_reply,
                            conversation.id,
                            purpose=OutboxPurpose.notice,
                        )
                    ],
                    trace_id=action.trace_id,
                )
            expired += 1
            log.info(
                "pending_action_expired",
                tenant_id=str(tenant_id),
                pending_action_id=str(action.id),
                customer_told=conversation is not None and customer is not None,
            )
    return expired


async def approvals_sweep(ctx: dict[str, Any]) -> dict[str, int]:
    """ARQ cron job: notify actions nobody was told about, then expire overdue ones.

    Returns:
        ``{"notified": N, "expired": M}``.
    """
    sessions: async_sessionmaker[AsyncSession] = ctx["deps"].resources.sessions
    async with sessions() as session:
        tenants = list(
            (
                await session.exec(
                    select(PendingAction.tenant_id)
                    .where(
                        PendingAction.status == PendingActionStatus.pending.value,
                        col(PendingAction.notified_at).is_(None),
                    )
                    .distinct()
                    .limit(SWEEP_BATCH)
                )
            ).all()
        )
    notified = 0
    for tenant_id in tenants:
        notified += await notify_pending_actions(sessions, tenant_id=tenant_id)
    expired = await expire_pending_actions(sessions)
    if notified or expired:
        log.info("approvals_swept", notified=notified, expired=expired)
    return {"notified": notified, "expired": expired}
