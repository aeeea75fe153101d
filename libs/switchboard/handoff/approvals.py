"""``/approve ID`` and ``/reject ID [reason]``: an agent decides a tool call waiting for a person.

Who may decide: the agent the conversation is assigned to; for a conversation no agent holds, any
online agent of the tenant (:func:`switchboard.handoff.pending.may_decide`). A ``pending_actions`` row
(written by the tool server when a write needs approval) is decided exactly once: the row is locked
(``FOR UPDATE``) and must still be ``pending``. Approving re-checks that the tool is still enabled
for the tenant and that the stored arguments still validate against the tool's input model, then
runs the handler with them and the original idempotency key in the same transaction as the status
change and an ``audit_logs`` row (actor ``human_agent``), so a failure changes nothing and a repeated
``/approve`` only reports the earlier decision.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import String, cast
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.engine import session_scope
from switchboard.db.models import (
    AuditLog,
    Conversation,
    HumanAgent,
    McpTenantTool,
    PendingAction,
    PendingActionStatus,
    utcnow,
)
from switchboard.handoff.pending import may_decide, short_id, visible_pending_actions
from switchboard.observability import get_logger

__all__ = ["ApprovalError", "Decider", "decide_pending_action", "pending_actions_for", "short_id"]

log = get_logger(__name__)

MIN_PREFIX_CHARS = 6
"""Shortest id prefix accepted (``/status`` shows the first 8 hex characters)."""


class ApprovalError(Exception):
    """The decision cannot be made; the message is what the agent reads."""


@dataclass(frozen=True)
class Decider:
    """Who decides a pending action: a human agent on WhatsApp, or a person in the web console.

    Attributes:
        tenant_id: the decider's tenant (only its actions are found).
        actor: ``audit_logs.actor``: ``human_agent`` or ``console_user``.
        id: the agent's or console user's id (``decided_by`` is ``<actor>:<id>``).
        name: shown in the audit details.
        may_decide: whether they may decide an action of this conversation (``None``: no conversation).
    """

    tenant_id: uuid.UUID
    actor: str
    id: uuid.UUID
    name: str
    may_decide: Callable[[Conversation | None], bool]

    @classmethod
    def of_agent(cls, agent: HumanAgent) -> Decider:
        """The WhatsApp agent rule (:func:`switchboard.handoff.pending.may_decide`)."""
        return cls(agent.tenant_id, "human_agent", agent.id, agent.name, lambda c: may_decide(agent, c))


async def pending_actions_for(session: AsyncSession, agent: HumanAgent) -> list[PendingAction]:
    """Pending actions the agent may decide now, oldest first (see :func:`switchboard.handoff.pending.visible_pending_actions`)."""
    return await visible_pending_actions(session, agent)


async def _find(session: AsyncSession, agent: Decider, ref: str) -> PendingAction:
    ref = ref.strip().lower().replace("-", "")
    if len(ref) < MIN_PREFIX_CHARS or any(c not in "0123456789abcdef" for c in ref):
        raise ApprovalError(f"{ref or 'That'} is not an action id: use the 8 characters /status shows.")
    rows = list(
        (
            await session.exec(
                select(PendingAction)
                .where(
                    PendingAction.tenant_id == agent.tenant_id,
                    cast(PendingAction.id, String).op("~~")(_like_prefix(ref)),
                )
                .with_for_update()
            )
        ).all()
    )
    if len(rows) != 1:
        raise ApprovalError(
            f"No action {ref} waiting for you."
            if not rows
            else f"{ref} matches several actions: type more of it."
        )
    action = rows[0]
    conversation = await session.get(Conversation, action.conversation_id) if action.conversation_id else None
    if not agent.may_decide(conversation):
        raise ApprovalError(f"Action {short_id(action.id)} belongs to a conversation you are not handling.")
    return action


def _like_prefix(ref: str) -> str:
    """A LIKE pattern matching a UUID's text form by the hex prefix ``ref`` (dashes at 8, 12, 16, 20)."""
    text = ""
    for index, char in enumerate(ref[:32]):
        if index in (8, 12, 16, 20):
            text += "-"
        text += char
    return text + "%"


async def decide_pending_action(
    sessions: async_sessionmaker[AsyncSession],
    *,
    agent: HumanAgent | Decider,
    ref: str,
    approve: bool,
    reason: str | None = None,
) -> str:
    """Approve (run the tool now) or reject a pending action; returns the answer for the agent.

    Args:
        agent: the WhatsApp agent deciding (``/approve``), or a :class:`Decider` (the web console).

    Raises:
        ApprovalError: unknown or ambiguous id, not the agent's conversation, already decided, or the
            tool failed when run (nothing changed; the action stays pending).
    """
    from switchboard.errors import ToolError
    from switchboard.tools.business import BUSINESS_TOOLS
    from switchboard.tools.contracts import ToolCallContext

    contracts = {c.name: c for c in BUSINESS_TOOLS}
    agent = agent if isinstance(agent, Decider) else Decider.of_agent(agent)
    try:
        async with session_scope(sessions) as session:
            action = await _find(session, agent, ref)
            if action.status != PendingActionStatus.pending.value:
                raise ApprovalError(f"Action {short_id(action.id)} was already {action.status}.")
            details: dict[str, Any] = {"tool_name": action.tool_name, "agent_name": agent.name}
            if approve:
                contract = contracts.get(action.tool_name)
                if contract is None:
                    raise ApprovalError(
                        f"Action {short_id(action.id)}: the tool {action.tool_name} no longer exists."
                    )
                assignment = (
                    await session.exec(
                        select(McpTenantTool).where(
                            McpTenantTool.tenant_id == agent.tenant_id,
                            McpTenantTool.tool_name == action.tool_name,
                        )
                    )
                ).first()
                if assignment is None or not assignment.enabled:
                    raise ApprovalError(
                        f"Action {short_id(action.id)}: the tool {action.tool_name} is no longer enabled for "
                        "this business, so nothing was done. Enable it again and /approve, or /reject it."
                    )
                try:
                    args = contract.input_model.model_validate(action.arguments)
                except ValidationError as exc:
                    problems = "; ".join(
                        f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                        for err in exc.errors()
                    )
                    raise ApprovalError(
                        f"Action {short_id(action.id)}: its arguments no longer pass the tool's checks ({problems[:300]}), "
                        "so nothing was done. /reject it and ask the customer again."
                    ) from None
                ctx = ToolCallContext(
                    tenant_id=agent.tenant_id,
                    customer_id=action.customer_id,
                    conversation_id=action.conversation_id,
                    trace_id=action.trace_id,
                    idempotency_key=action.idempotency_key,
                    tool_config=dict(assignment.custom_config or {}),
                    session=session,
                )
                result = await contract.handler(ctx, args)
                details["result"] = result.model_dump(mode="json")
            else:
                details["reason"] = (reason or "")[:500]
            action.status = (PendingActionStatus.approved if approve else PendingActionStatus.rejected).value
            action.decided_by = f"{agent.actor}:{agent.id}"
            action.decided_at = utcnow()
            session.add(action)
            session.add(
                AuditLog(
                    tenant_id=agent.tenant_id,
                    actor=agent.actor,
                    action=f"pending_action.{action.status}",
                    target_type="pending_action",
                    target_id=str(action.id),
                    details=details,
                    trace_id=action.trace_id,
                )
            )
            label = short_id(action.id)
    except ToolError as exc:
        log.info("pending_action_failed", agent_id=str(agent.id), error_type=exc.error_type)
        raise ApprovalError(
            f"The tool refused: {exc}. Nothing was done; the action is still pending."
        ) from None
    log.info("pending_action_decided", agent_id=str(agent.id), approved=approve)
    if approve:
        message = details["result"].get("message") if isinstance(details.get("result"), dict) else None
        return f"Approved {label}: done" + (f" ({message})." if message else ".")
    return f"Rejected {label}" + (f": {reason}." if reason else ".")
