"""What the inbox and the conversation page read: one query per view, scoped to one tenant.

Reads only (writes are :mod:`switchboard.console.actions`). The CLI (``switchboard conversations
list|show``), the admin API and the console pages all use these functions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import DateTime, and_, case, cast, func, null, or_, true
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import channel_capabilities, within_window
from switchboard.conversations.notes import notes_of
from switchboard.db.models import (
    ConsoleUser,
    Conversation,
    ConversationEvent,
    ConversationRead,
    ConversationStatus,
    CsatAnswer,
    Customer,
    HumanAgent,
    Message,
    MessageDirection,
    MessageRole,
    Outbox,
    PendingAction,
    PendingActionStatus,
    Team,
    ToolReceipt,
    Turn,
    utcnow,
)
from switchboard.handoff.notices import customer_label
from switchboard.handoff.teams import TEAM_REASON
from switchboard.i18n import N_
from switchboard.tenant_settings import load_tenant_settings

__all__ = [
    "Mode",
    "InboxFilters",
    "InboxRow",
    "ThreadMessage",
    "HistoryLine",
    "history_line",
    "TurnDetails",
    "ToolCallView",
    "ConversationView",
    "mode_of",
    "list_inbox",
    "conversation_view",
    "mark_read",
    "sender_of",
    "unread_total",
    "INBOX_LIMIT",
]

INBOX_LIMIT = 100
"""Rows the inbox shows at most (newest activity first)."""
_SHOWN_ROLES = (MessageRole.user.value, MessageRole.assistant.value, MessageRole.human_agent.value)


class Mode(StrEnum):
    """Who has the conversation, as the inbox filters it."""

    ai = "ai"  # the AI answers
    human = "human"  # a person has it (a WhatsApp agent or a console user)
    waiting = "waiting"  # handed to a person, waiting in the queue for one
    closed = "closed"


def mode_of(conversation: Conversation) -> Mode:
    if conversation.status == ConversationStatus.closed.value:
        return Mode.closed
    if conversation.status == ConversationStatus.human.value:
        if conversation.assigned_agent_id is None and conversation.assigned_user_id is None:
            return Mode.waiting
        return Mode.human
    return Mode.ai


@dataclass(frozen=True)
class InboxFilters:
    """The inbox's filters; ``None`` / empty means "any".

    Attributes:
        channel: ``whatsapp`` | ``instagram`` | ``gmail``.
        mode: a :class:`Mode`.
        assigned: ``agent:<uuid>`` (a WhatsApp agent), ``user:<uuid>`` (a console user), ``me`` (the
            viewer's own) or ``none`` (open conversations no person has: the AI's and the waiting ones).
        team: ``<uuid>`` of a team: only conversations given to that team.
        unread: only conversations with a customer message the viewer has not opened since.
        q: text searched (case-insensitive) in the customer's name, number, id, e-mail and messages.
    """

    channel: str | None = None
    mode: Mode | None = None
    assigned: str | None = None
    unread: bool = False
    q: str | None = None
    team: uuid.UUID | None = None


@dataclass(frozen=True)
class InboxRow:
    """One line of the inbox."""

    conversation_id: uuid.UUID
    channel: str
    mode: Mode
    customer: str
    """How a person reads the customer (:func:`~switchboard.handoff.notices.customer_label`)."""
    last_text: str
    last_at: datetime
    last_from: str
    """``customer``, ``ai``, ``human``."""
    assigned_to: str | None
    unread_count: int
    """Customer messages since the viewer last opened the conversation."""
    waiting_since: datetime | None = None
    """When it started waiting for a person (set only while it waits: pinned at the top)."""
    team: str | None = None
    """The name of the team it was given to."""

    @property
    def unread(self) -> bool:
        return self.unread_count > 0


def _read_at(viewer_id: uuid.UUID | None) -> Any:
    """The viewer's last-read time of the outer query's conversation (SQL; null: never opened, or no
    viewer)."""
    if viewer_id is None:
        return cast(null(), DateTime(timezone=True))
    # Correlated by name: nested inside the unread-count subquery, automatic correlation looks only one
    # level up (messages) and would read every conversation of the table instead of the listed one.
    return (
        select(ConversationRead.read_at)
        .where(ConversationRead.conversation_id == Conversation.id, ConversationRead.user_id == viewer_id)
        .correlate(Conversation)
        .scalar_subquery()
    )


def _unread_count(read_at: Any) -> Any:
    """Customer messages of the outer query's conversation newer than ``read_at`` (SQL integer)."""
    return (
        select(func.count(Message.id))
        .where(
            col(Message.conversation_id) == col(Conversation.id),
            Message.direction == MessageDirection.inbound.value,
            Message.role == MessageRole.user.value,
            or_(read_at.is_(None), col(Message.created_at) > read_at),
        )
        .scalar_subquery()
    )


async def unread_total(session: AsyncSession, *, tenant_id: uuid.UUID, viewer_id: uuid.UUID) -> int:
    """How many of the tenant's open conversations have customer messages the viewer has not seen (the
    navigation's badge and the page title)."""
    read_at = _read_at(viewer_id)
    last_in = (
        select(func.max(Message.created_at))
        .where(
            col(Message.conversation_id) == col(Conversation.id),
            Message.direction == MessageDirection.inbound.value,
            Message.role == MessageRole.user.value,
        )
        .scalar_subquery()
    )
    query = select(func.count(Conversation.id)).where(
        Conversation.tenant_id == tenant_id,
        col(Conversation.is_agent_console).is_(False),
        Conversation.status != ConversationStatus.closed.value,
        last_in.is_not(None),
        or_(read_at.is_(None), last_in > read_at),
    )
    return int((await session.exec(query)).one())


async def list_inbox(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    viewer_id: uuid.UUID | None = None,
    filters: InboxFilters = InboxFilters(),
    limit: int = INBOX_LIMIT,
) -> list[InboxRow]:
    """The tenant's conversations (agents' own consoles left out): those waiting for a person first,
    longest wait on top, then the others, newest activity first.

    Args:
        viewer_id: the console user looking (their read marks decide "unread"; ``None``: the CLI or the
            admin token, for whom everything with a customer message counts as unread).
    """
    last = (
        select(Message.created_at, Message.text, Message.kind, Message.role)
        .where(
            col(Message.conversation_id) == col(Conversation.id),
            col(Message.role).in_(_SHOWN_ROLES),
            Message.kind != "system",  # a note for the AI (handed back) is nobody's message
        )
        .order_by(col(Message.created_at).desc())
        .limit(1)
        .lateral("last")
    )
    last_in = (
        select(func.max(Message.created_at))
        .where(
            col(Message.conversation_id) == col(Conversation.id),
            Message.direction == MessageDirection.inbound.value,
            Message.role == MessageRole.user.value,
        )
        .scalar_subquery()
    )
    read_at = _read_at(viewer_id)
    unread = and_(last_in.is_not(None), or_(read_at.is_(None), last_in > read_at))
    unread_count = _unread_count(read_at)
    activity = func.coalesce(last.c.created_at, Conversation.updated_at)
    waiting = and_(
        Conversation.status == ConversationStatus.human.value,
        col(Conversation.assigned_agent_id).is_(None),
        col(Conversation.assigned_user_id).is_(None),
    )
    query = (
        select(
            Conversation,
            Customer,
            last.c.text,
            last.c.kind,
            last.c.role,
            activity,
            unread_count,
            HumanAgent.name,
            ConsoleUser.email,
            Team.name,
        )
        .join(Customer, col(Customer.id) == col(Conversation.customer_id))
        .join(last, true(), isouter=True)
        .join(HumanAgent, col(HumanAgent.id) == col(Conversation.assigned_agent_id), isouter=True)
        .join(ConsoleUser, col(ConsoleUser.id) == col(Conversation.assigned_user_id), isouter=True)
        .join(Team, col(Team.id) == col(Conversation.team_id), isouter=True)
        .where(Conversation.tenant_id == tenant_id, col(Conversation.is_agent_console).is_(False))
    )
    if filters.channel:
        query = query.where(Conversation.channel == filters.channel)
    if filters.mode is not None:
        mode = filters.mode
        if mode == Mode.closed:
            query = query.where(Conversation.status == ConversationStatus.closed.value)
        elif mode == Mode.ai:
            query = query.where(Conversation.status == ConversationStatus.ai.value)
        else:
            nobody = and_(
                col(Conversation.assigned_agent_id).is_(None), col(Conversation.assigned_user_id).is_(None)
            )
            query = query.where(
                Conversation.status == ConversationStatus.human.value,
                nobody if mode == Mode.waiting else ~nobody,
            )
    if filters.assigned:
        kind, _, value = filters.assigned.partition(":")
        if kind in ("me", "agent", "user") and filters.mode != Mode.closed:
            # a closed conversation keeps who handled it, but is nobody's work any more
            query = query.where(Conversation.status != ConversationStatus.closed.value)
        if kind == "me" and viewer_id is not None:
            query = query.where(Conversation.assigned_user_id == viewer_id)
        elif kind == "none":
            query = query.where(
                Conversation.status != ConversationStatus.closed.value,
                col(Conversation.assigned_agent_id).is_(None),
                col(Conversation.assigned_user_id).is_(None),
            )
        elif kind in ("agent", "user"):
            try:
                wanted = uuid.UUID(value)
            except ValueError:
                return []
            column = Conversation.assigned_agent_id if kind == "agent" else Conversation.assigned_user_id
            query = query.where(column == wanted)
    if filters.team is not None:
        query = query.where(Conversation.team_id == filters.team)
    if filters.unread:
        query = query.where(unread)
    if filters.q and filters.q.strip():
        pattern = "%" + filters.q.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        in_messages = (
            select(Message.id)
            .where(col(Message.conversation_id) == col(Conversation.id), col(Message.text).ilike(pattern))
            .exists()
        )
        query = query.where(
            or_(
                col(Customer.display_name).ilike(pattern),
                col(Customer.external_user_id).ilike(pattern),
                col(Customer.phone).ilike(pattern),
                col(Customer.email).ilike(pattern),
                in_messages,
            )
        )
    # waiting for a person first, longest wait on top; then everything else, newest activity first
    waited_since = func.coalesce(Conversation.queued_at, Conversation.updated_at)
    query = query.order_by(
        case((waiting, 0), else_=1),
        case((waiting, waited_since), else_=None).asc(),
        activity.desc(),
        col(Conversation.id),
    ).limit(limit)
    rows = (await session.exec(query)).all()  # type: ignore[call-overload]
    out: list[InboxRow] = []
    for conversation, customer, text, kind, role, at, count, agent_name, user_email, team_name in rows:
        mode = mode_of(conversation)
        out.append(
            InboxRow(
                conversation_id=conversation.id,
                channel=shown_channel(conversation, customer),
                mode=mode,
                customer=customer_label(customer),
                last_text=(text or (f"[{kind}]" if kind else "")).strip()[:140],
                last_at=at or conversation.updated_at,
                last_from={"user": "customer", "assistant": "ai", "human_agent": "human"}.get(role or "", ""),
                assigned_to=agent_name or user_email,
                unread_count=int(count or 0),
                waiting_since=(conversation.queued_at or conversation.updated_at)
                if mode == Mode.waiting
                else None,
                team=team_name,
            )
        )
    return out


@dataclass
class ThreadMessage:
    """One message of the thread as the conversation page shows it."""

    id: uuid.UUID
    kind_of_sender: str
    """``customer``, ``ai``, ``human`` (a person: WhatsApp agent or console user), ``system``, or
    ``note`` (a private note of the team: not a message, never sent)."""
    sender_name: str
    text: str
    kind: str
    media: list[dict[str, Any]]
    """Media references; each with ``index`` (for the console's media route) and ``kind``."""
    at: datetime
    trace_id: str | None
    delivery: list[str] = field(default_factory=list)
    """Statuses of the outbox parts of an outbound message (``sent``, ``delivered``, ``failed: 131047``...)."""
    turn: TurnDetails | None = None


@dataclass(frozen=True)
class ToolCallView:
    """One tool call of a turn: arguments from the model's message, outcome and duration from its receipt."""

    name: str
    arguments: str
    outcome: str | None
    duration_ms: float | None
    error: str | None


@dataclass(frozen=True)
class TurnDetails:
    """What a turn row holds (``turns``), with its tool receipts."""

    trace_id: str
    model: str | None
    """``model_info.id`` of the deployment that answered last."""
    fallback_used: bool
    outcome: str | None
    tokens: dict[str, Any]
    latency_ms: float | None
    timings: dict[str, Any]
    error: str | None
    tool_calls: list[ToolCallView]
    guardrails: Any = None
    """Guardrail results when the turn row carries them (``result["guardrails"]``)."""


@dataclass(frozen=True)
class HistoryLine:
    """One lifecycle event in words: ``words`` is an English msgid (translated by the page) with
    ``%(name)s`` / ``%(who)s`` placeholders filled from ``names``."""

    at: datetime
    words: str
    names: dict[str, str]
    translated: frozenset[str] = frozenset()
    """Keys of ``names`` whose value is itself a msgid ("the AI"), not a person's name."""


def history_line(event: ConversationEvent, agents: dict[str, str], users: dict[str, str]) -> HistoryLine:
    """How a person reads a lifecycle event ("Ana took over", "Handed back to the AI by Ana", "Closed by
    Ana") instead of its statuses.

    Args:
        agents: WhatsApp agent id (``str``) → name; ``users``: console user id → name or e-mail.
    """
    actor = event.actor_type
    who = {
        "ai": N_("the AI"),
        "customer": N_("the customer"),
        "system": N_("Switchboard"),
        "api": N_("the admin API"),
        "business_app": N_("the business app"),
    }.get(actor, "")
    fixed = True
    if actor == "agent":
        who = agents.get(event.actor_id or "", "")
        fixed = not who
        who = who or N_("an agent")
    elif actor == "console_user":
        who = users.get(event.actor_id or "", "")
        fixed = not who
        who = who or N_("a person")
    to, before = event.to_status, event.from_status
    agent = agents.get(str(event.agent_id), "") if event.agent_id else ""
    reason = event.reason or ""

    def line(words: str, **names: str) -> HistoryLine:
        return HistoryLine(
            event.created_at, words, names, frozenset({"who"} if fixed and "who" in names else ())
        )

    if before is None:
        return line(N_("Conversation started"))
    if to == ConversationStatus.closed.value:
        if actor == "system":
            return line(N_("Closed after a time without messages"))
        return line(N_("Closed by %(who)s"), who=who)
    if before == ConversationStatus.closed.value:
        return line(N_("Reopened by %(who)s"), who=who)
    if to == ConversationStatus.ai.value:
        return line(N_("Handed back to the AI by %(who)s"), who=who)
    # to a person, or waiting for one
    if agent:
        if actor == "agent" and event.actor_id == str(event.agent_id):
            return line(N_("%(name)s took it"), name=agent)
        if actor in ("agent", "console_user") and before == ConversationStatus.human.value:
            return line(N_("%(who)s transferred it to %(name)s"), who=who, name=agent)
        if actor == "console_user":
            return line(N_("%(who)s assigned it to %(name)s"), who=who, name=agent)
        if actor == "customer":
            return line(N_("The customer asked for a person: %(name)s has it"), name=agent)
        if actor == "ai":
            return line(N_("The AI handed it to %(name)s"), name=agent)
        return line(N_("%(name)s has it now"), name=agent)
    if actor == "console_user":
        if TEAM_REASON in reason:
            team = reason.split(TEAM_REASON, 1)[1]
            return line(
                N_("%(who)s gave it to the team %(team)s: waiting for one of its agents"), who=who, team=team
            )
        if reason.startswith("taken over"):
            return line(N_("%(who)s took over"), who=who)
        return line(N_("Assigned to %(who)s"), who=who)
    if actor == "customer":
        return line(N_("The customer asked for a person: waiting for one"))
    if actor == "ai":
        return line(N_("The AI asked for a person: waiting for one"))
    return line(N_("Waiting for a person"))


@dataclass
class ConversationView:
    """Everything the conversation page shows."""

    conversation: Conversation
    customer: Customer
    customer_label: str
    mode: Mode
    assigned_to: str | None
    messages: list[ThreadMessage]
    events: list[ConversationEvent]
    pending_actions: list[PendingAction]
    agents: list[HumanAgent]
    users: list[ConsoleUser]
    window_open: bool | None
    """Whether the customer wrote within the channel's service window (``None``: the channel has none)."""
    history: list[HistoryLine] = field(default_factory=list)
    """``events`` in words, oldest first."""
    farewell: str = ""
    """What closing sends the customer (the tenant's ``handoff.farewell``; empty: nothing)."""
    teams: list[Team] = field(default_factory=list)
    """The tenant's teams (the "assign to" choices)."""
    team: str | None = None
    """The name of the team the conversation was given to."""
    csat: CsatAnswer | None = None
    """The customer's satisfaction answer (rating 1-5 and comment), once asked."""
    channel: str = ""
    """The channel as shown (:func:`shown_channel`)."""


SIMULATED = "simulated"
"""The channel shown for a conversation of ``switchboard simulate`` (no channel account, customer
``simulate:<name>``): it never reached a real channel, so it is not shown as one."""


def shown_channel(conversation: Conversation, customer: Customer | None) -> str:
    """``conversation``'s channel as the console shows it: :data:`SIMULATED` for a simulated turn's."""
    if conversation.channel_account_id is None and (customer and customer.external_user_id or "").startswith(
        "simulate:"
    ):
        return SIMULATED
    return conversation.channel


API_SENDER = "API"
"""The name of a message sent through the public API by a key without a name."""


def sender_of(row: Message) -> tuple[str, str]:
    """Who wrote a thread row: ``(kind, name)``, kind ``customer``, ``ai``, ``human`` or ``system`` (a
    note about the conversation, e.g. a hand-back, kept for the model's history). A message sent through
    the public API is ``human`` named after its API key (else :data:`API_SENDER`); one sent from the
    command line is ``CLI``."""
    proxy = row.proxy_metadata or {}
    if row.kind == "system" or row.role == MessageRole.system.value:
        return "system", "system"
    if row.role == MessageRole.user.value:
        return "customer", ""
    if row.role == MessageRole.human_agent.value:
        if proxy.get("event"):
            return "system", "system"
        if proxy.get("sender") == "api":
            return "human", str(proxy.get("key_name") or API_SENDER)
        if proxy.get("sender") == "cli":  # `switchboard outreach send`
            return "human", "CLI"
        return "human", str(proxy.get("agent_name") or proxy.get("user_email") or "person")
    return "ai", "AI"


def _tool_calls(assistant_rows: list[Message], receipts: list[ToolReceipt]) -> list[ToolCallView]:
    calls: list[ToolCallView] = []
    pool = list(receipts)
    for row in assistant_rows:
        for call in row.tool_calls or []:
            function = call.get("function") or {}
            name = str(function.get("name") or call.get("name") or "?")
            receipt = next((r for r in pool if r.tool_name == name), None)
            if receipt is not None:
                pool.remove(receipt)
            calls.append(
                ToolCallView(
                    name=name,
                    arguments=str(function.get("arguments") or "")[:2000],
                    outcome=receipt.outcome if receipt else None,
                    duration_ms=receipt.duration_ms if receipt else None,
                    error=(receipt.error_type or receipt.rejection_reason) if receipt else None,
                )
            )
    for receipt in pool:  # a receipt without a model message (a built-in tool, a refused call)
        calls.append(
            ToolCallView(
                receipt.tool_name,
                "",
                receipt.outcome,
                receipt.duration_ms,
                receipt.error_type or receipt.rejection_reason,
            )
        )
    return calls


async def conversation_view(
    session: AsyncSession, *, tenant_id: uuid.UUID, conversation_id: uuid.UUID
) -> ConversationView | None:
    """The conversation page's data, or ``None`` when the conversation is not this tenant's."""
    conversation = await session.get(Conversation, conversation_id)
    if conversation is None or conversation.tenant_id != tenant_id:
        return None
    customer = await session.get(Customer, conversation.customer_id)
    assert customer is not None
    rows = list(
        (
            await session.exec(
                select(Message)
                .where(Message.tenant_id == tenant_id, Message.conversation_id == conversation_id)
                .order_by(col(Message.created_at), col(Message.id))
            )
        ).all()
    )
    turns = {
        t.trace_id: t
        for t in (
            await session.exec(
                select(Turn).where(Turn.tenant_id == tenant_id, Turn.conversation_id == conversation_id)
            )
        ).all()
    }
    receipts: dict[str, list[ToolReceipt]] = {}
    for receipt in (
        await session.exec(
            select(ToolReceipt)
            .where(ToolReceipt.tenant_id == tenant_id, ToolReceipt.conversation_id == conversation_id)
            .order_by(col(ToolReceipt.created_at))
        )
    ).all():
        receipts.setdefault(receipt.trace_id or "", []).append(receipt)
    outbox = list(
        (
            await session.exec(
                select(Outbox)
                .where(Outbox.tenant_id == tenant_id, Outbox.conversation_id == conversation_id)
                .order_by(col(Outbox.created_at), col(Outbox.part_index))
            )
        ).all()
    )
    by_external = {o.external_id: o for o in outbox if o.external_id}
    assistant_by_trace: dict[str, list[Message]] = {}
    for row in rows:
        if row.role == MessageRole.assistant.value and row.tool_calls:
            assistant_by_trace.setdefault(row.trace_id or "", []).append(row)
    messages: list[ThreadMessage] = []
    seen_turns: set[str] = set()
    for row in rows:
        if row.role not in _SHOWN_ROLES and row.kind != "system":
            continue
        if row.role == MessageRole.assistant.value and not (row.text or "").strip() and row.tool_calls:
            continue  # the model's tool-call step: shown inside the turn, not as a message
        if row.direction == MessageDirection.outbound.value and row.role == MessageRole.user.value:
            continue
        who, name = sender_of(row)
        message = ThreadMessage(
            id=row.id,
            kind_of_sender=who,
            sender_name=name,
            text=row.text or "",
            kind=row.kind,
            media=[
                {**m, "index": i, "kind": m.get("kind") or row.kind}
                for i, m in enumerate(row.media or [])
                if isinstance(m, dict)
            ],
            at=row.created_at,
            trace_id=row.trace_id,
        )
        if row.direction == MessageDirection.outbound.value:
            sent = by_external.get(row.external_id) if row.external_id else None
            parts = (
                [sent]
                if sent
                else [
                    o
                    for o in outbox
                    if o.trace_id and o.trace_id == row.trace_id and o.payload.get("audience") == "customer"
                ]
            )
            message.delivery = [
                o.status + (f": {o.error_code}" if o.error_code else "") for o in parts if o is not None
            ]
        turn = turns.get(row.trace_id or "") if who == "ai" else None
        if turn is not None and turn.trace_id not in seen_turns:
            seen_turns.add(turn.trace_id)
            message.turn = TurnDetails(
                trace_id=turn.trace_id,
                model=turn.model,
                fallback_used=turn.fallback_used,
                outcome=turn.outcome,
                tokens=dict(turn.usage or {}),
                latency_ms=(turn.timings or {}).get("total_ms"),
                timings=dict(turn.timings or {}),
                error=turn.error,
                tool_calls=_tool_calls(
                    assistant_by_trace.get(turn.trace_id, []), receipts.get(turn.trace_id, [])
                ),
                guardrails=(turn.result or {}).get("guardrails") if isinstance(turn.result, dict) else None,
            )
        messages.append(message)
    for kept in await notes_of(session, tenant_id=tenant_id, conversation_id=conversation_id):
        messages.append(
            ThreadMessage(
                id=kept.id,
                kind_of_sender="note",
                sender_name=kept.author_name,
                text=kept.text,
                kind="note",
                media=[],
                at=kept.created_at,
                trace_id=None,
            )
        )
    messages.sort(key=lambda m: m.at)  # stable: messages keep their order, notes go where they were written
    events = list(
        (
            await session.exec(
                select(ConversationEvent)
                .where(
                    ConversationEvent.tenant_id == tenant_id,
                    ConversationEvent.conversation_id == conversation_id,
                )
                .order_by(col(ConversationEvent.created_at))
            )
        ).all()
    )
    pending = list(
        (
            await session.exec(
                select(PendingAction)
                .where(
                    PendingAction.tenant_id == tenant_id,
                    PendingAction.conversation_id == conversation_id,
                    PendingAction.status == PendingActionStatus.pending.value,
                )
                .order_by(col(PendingAction.created_at))
            )
        ).all()
    )
    agents = list(
        (
            await session.exec(
                select(HumanAgent).where(HumanAgent.tenant_id == tenant_id).order_by(col(HumanAgent.name))
            )
        ).all()
    )
    users = list(
        (
            await session.exec(
                select(ConsoleUser)
                .where(ConsoleUser.tenant_id == tenant_id, col(ConsoleUser.is_active).is_(True))
                .order_by(col(ConsoleUser.email))
            )
        ).all()
    )
    assigned = None
    if conversation.assigned_agent_id:
        assigned = next((a.name for a in agents if a.id == conversation.assigned_agent_id), None)
    elif conversation.assigned_user_id:
        user = await session.get(ConsoleUser, conversation.assigned_user_id)
        assigned = (user.name or user.email) if user else None
    caps = channel_capabilities(conversation.channel)
    window_open = (
        within_window(caps, conversation.last_customer_message_at, utcnow())
        if caps is not None and caps.service_window is not None
        else None
    )
    teams = list(
        (await session.exec(select(Team).where(Team.tenant_id == tenant_id).order_by(col(Team.name)))).all()
    )
    agent_names = {str(a.id): a.name for a in agents}
    user_names = {str(u.id): u.name or u.email for u in users}
    return ConversationView(
        history=[history_line(e, agent_names, user_names) for e in events],
        farewell=(await load_tenant_settings(session, tenant_id)).handoff.farewell.strip(),
        channel=shown_channel(conversation, customer),
        conversation=conversation,
        customer=customer,
        customer_label=customer_label(customer),
        mode=mode_of(conversation),
        assigned_to=assigned,
        messages=messages,
        events=events,
        pending_actions=pending,
        agents=agents,
        users=users,
        window_open=window_open,
        teams=teams,
        team=next((t.name for t in teams if t.id == conversation.team_id), None),
        csat=(
            await session.exec(
                select(CsatAnswer).where(
                    CsatAnswer.tenant_id == tenant_id, CsatAnswer.conversation_id == conversation_id
                )
            )
        ).first(),
    )


async def mark_read(
    session: AsyncSession, *, tenant_id: uuid.UUID, user_id: uuid.UUID, conversation_id: uuid.UUID
) -> None:
    """The user has seen the conversation up to now (caller's transaction)."""
    from sqlalchemy.dialects.postgresql import insert

    now = utcnow()
    stmt = insert(ConversationRead.__table__).values(  # type: ignore[arg-type]
        id=uuid.uuid4(), tenant_id=tenant_id, user_id=user_id, conversation_id=conversation_id, read_at=now
    )
    stmt = stmt.on_conflict_do_update(constraint="uq_console_reads_user_conversation", set_={"read_at": now})
    await session.execute(stmt)
