"""What a person does to a conversation from the web console (and the admin API, and nothing else).

Each action is one transaction through the conversations core and the handoff (the same functions
the WhatsApp agents' slash commands use), then a live event for the tenant's open pages:

* :func:`take_over` — the console user has it now (human mode): the AI stops at once (the inbound
  job's human-mode step relays nothing and calls no model while ``assigned_user_id`` is set).
* :func:`reply` — the person's text goes into the history (``human_agent``) and through the ONE
  outbox writer (purpose ``human_reply``) to the customer's own channel; the delivery loop applies
  the channel's window rules (WhatsApp: free text within 24 h of the customer's last message,
  otherwise the row fails ``window_closed``; Instagram: the 7-day ``HUMAN_AGENT`` tag).
* :func:`hand_back` — back to the AI, with the note the AI's next turn reads.
* :func:`transfer` — to another console user, or to a WhatsApp agent (who gets the usual notice).
* :func:`close` — closed (handed back first when a person had it), with the tenant's farewell.
* :func:`reopen` — a closed conversation open again, the AI answering.
* :func:`decide` — approve or reject a pending action (the tool runs on approval).
* :func:`note` — a private note for the team, never sent to the customer nor read by the model.

Errors are :class:`ActionRefused` with the text the person reads (the API answers 409 with it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import Actor, InvalidTransition, add_note, append_message, back_to_ai
from switchboard.conversations import close as close_conversation
from switchboard.conversations import reopen as reopen_conversation
from switchboard.db.engine import session_scope
from switchboard.db.models import (
    ConsoleUser,
    Conversation,
    ConversationStatus,
    Customer,
    HumanAgent,
    MessageRole,
    OutboxPurpose,
    Team,
)
from switchboard.errors import SwitchboardError
from switchboard.handoff.approvals import ApprovalError, Decider, decide_pending_action
from switchboard.handoff.assignment import (
    closed_by_person,
    give_to_team,
    hand_to_agent,
    hand_to_console_user,
    release,
    tenant_handoff_lock,
)
from switchboard.handoff.commands import HANDED_BACK_NOTE
from switchboard.handoff.handback import queue_handed_back, reopen_unanswered
from switchboard.handoff.notices import (
    Outgoing,
    agent_outgoing,
    customer_address,
    customer_label,
    write_outgoing,
)
from switchboard.handoff.service import notices_for_assignments
from switchboard.handoff.teams import TEAM_REASON
from switchboard.live_updates import publish_conversation_event
from switchboard.observability import get_logger
from switchboard.outbox.jobs import deliver_soon
from switchboard.tenant_settings import load_tenant_settings

__all__ = [
    "ActionRefused",
    "Actioner",
    "take_over",
    "reply",
    "hand_back",
    "transfer",
    "close",
    "reopen",
    "decide",
    "note",
    "REPLY_MAX_CHARS",
]

log = get_logger(__name__)

REPLY_MAX_CHARS = 4096
"""Longest reply a person may type at once (the outbox splits it to the channel's limits)."""


class ActionRefused(SwitchboardError):
    """The action cannot be done now; the message says why, for the person."""


@dataclass(frozen=True)
class Actioner:
    """Who acts: a console user, or the admin token (``user`` ``None``: acts as the API)."""

    tenant_id: uuid.UUID
    user: ConsoleUser | None = None

    @property
    def actor(self) -> Actor:
        return Actor.console_user(self.user.id) if self.user else Actor.api()

    @property
    def name(self) -> str:
        return (self.user.name or self.user.email) if self.user else "admin API"


def _trace(kind: str) -> str:
    return f"console-{kind}-{uuid.uuid4().hex[:16]}"


async def _locked(session: AsyncSession, who: Actioner, conversation_id: uuid.UUID) -> Conversation:
    await tenant_handoff_lock(session, who.tenant_id)
    conversation = await session.get(
        Conversation, conversation_id, with_for_update=True, populate_existing=True
    )
    if conversation is None or conversation.tenant_id != who.tenant_id:
        raise LookupError("conversation not found")
    return conversation


async def _after(
    redis: Any, who: Actioner, conversation_id: uuid.UUID, kind: str, *, send: bool = False
) -> None:
    """What every action does once its transaction committed: ask for the delivery of what it wrote
    (``send``; the cron sweep would send it too) and tell the tenant's open console pages."""
    if send:
        await deliver_soon(redis, conversation_id, source="console")
    await publish_conversation_event(
        redis, tenant_id=who.tenant_id, conversation_id=conversation_id, kind=kind
    )


async def take_over(
    sessions: async_sessionmaker[AsyncSession], redis: Any, *, who: Actioner, conversation_id: uuid.UUID
) -> None:
    """The console user takes the conversation (the admin token cannot: it is nobody to reply as).

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: closed, an agent's own console, or no user acting.
    """
    if who.user is None:
        raise ActionRefused(
            "Only a logged-in person (session or user API token) can take a conversation over."
        )
    notices: list[Outgoing] = []
    async with session_scope(sessions) as session:
        conversation = await _locked(session, who, conversation_id)
        try:
            previous = await hand_to_console_user(
                session,
                conversation,
                user_id=who.user.id,
                reason=f"taken over in the console by {who.name}",
                trace_id=_trace("takeover"),
            )
        except InvalidTransition:
            raise ActionRefused("This conversation is closed: it cannot be taken over.") from None
        if previous is not None:
            customer = await session.get(Customer, conversation.customer_id)
            label = customer_label(customer) if customer else "the customer"
            notices.append(
                agent_outgoing(previous, f"{who.name} took {label} over in the web console.", conversation_id)
            )
            await write_outgoing(session, tenant_id=who.tenant_id, items=notices)
    log.info("console_takeover", conversation_id=str(conversation_id), user_id=str(who.user.id))
    await _after(redis, who, conversation_id, "status", send=bool(notices))


async def reply(
    sessions: async_sessionmaker[AsyncSession],
    redis: Any,
    *,
    who: Actioner,
    conversation_id: uuid.UUID,
    text: str,
) -> str:
    """Send ``text`` to the customer as the person who has the conversation; returns the trace id.

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: empty or too long, or the person has not taken the conversation over.
    """
    text = (text or "").strip()
    if not text:
        raise ActionRefused("Write something to send.")
    if len(text) > REPLY_MAX_CHARS:
        raise ActionRefused(f"A reply has at most {REPLY_MAX_CHARS} characters.")
    if who.user is None:
        raise ActionRefused("Only a logged-in person can reply to a customer.")
    trace_id = _trace("reply")
    async with session_scope(sessions) as session:
        conversation = await _locked(session, who, conversation_id)
        if (
            conversation.status != ConversationStatus.human.value
            or conversation.assigned_user_id != who.user.id
        ):
            raise ActionRefused("Take the conversation over first: the AI or someone else is answering it.")
        customer = await session.get(Customer, conversation.customer_id)
        assert customer is not None
        to = customer_address(customer)
        proxy = {
            "sender": "console_user",
            "user_id": str(who.user.id),
            "user_email": who.user.email,
            "agent_name": who.name,
            "relayed_to": to,
        }
        append_message(
            session,
            conversation=conversation,
            role=MessageRole.human_agent,
            text=text,
            proxy_metadata=proxy,
            trace_id=trace_id,
        )
        await write_outgoing(
            session,
            tenant_id=who.tenant_id,
            items=[
                Outgoing(
                    "customer", to, text, conversation.id, proxy=proxy, purpose=OutboxPurpose.human_reply
                )
            ],
            trace_id=trace_id,
        )
    log.info("console_reply", conversation_id=str(conversation_id), user_id=str(who.user.id), chars=len(text))
    await _after(redis, who, conversation_id, "reply", send=True)
    return trace_id


async def _hand_back_in(
    session: AsyncSession, who: Actioner, conversation: Conversation, trace_id: str
) -> list[Outgoing]:
    notices: list[Outgoing] = []
    if conversation.assigned_agent_id is not None:
        agent = await session.get(HumanAgent, conversation.assigned_agent_id, with_for_update=True)
        assert agent is not None
        await release(
            session,
            conversation,
            agent,
            actor=who.actor,
            reason="handed back in the console",
            trace_id=trace_id,
        )
        customer = await session.get(Customer, conversation.customer_id)
        label = customer_label(customer) if customer else "The customer"
        notices.append(
            agent_outgoing(agent, f"{label} was handed back to the AI by {who.name}.", conversation.id)
        )
    else:
        await back_to_ai(
            session, conversation, actor=who.actor, reason="handed back in the console", trace_id=trace_id
        )
    append_message(
        session,
        conversation=conversation,
        role=MessageRole.human_agent,
        kind="system",
        text=HANDED_BACK_NOTE,
        proxy_metadata={
            "event": "handed_back",
            "agent_name": who.name,
            "user_id": str(who.user.id) if who.user else None,
        },
        trace_id=trace_id,
    )
    return notices


async def hand_back(
    sessions: async_sessionmaker[AsyncSession], redis: Any, *, who: Actioner, conversation_id: uuid.UUID
) -> None:
    """Back to the AI (from a console user, a WhatsApp agent or the queue); what the customer wrote since
    the last reply they got is answered by an AI turn (:mod:`switchboard.handoff.handback`).

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: the AI has it already, or it is closed.
    """
    trace_id = _trace("handback")
    async with session_scope(sessions) as session:
        conversation = await _locked(session, who, conversation_id)
        if conversation.status != ConversationStatus.human.value or conversation.is_agent_console:
            raise ActionRefused("The AI already answers this conversation (or it is closed).")
        notices = await _hand_back_in(session, who, conversation, trace_id)
        if notices:
            await write_outgoing(session, tenant_id=who.tenant_id, items=notices, trace_id=trace_id)
        reopened = await reopen_unanswered(session, conversation_id)
    log.info("console_hand_back", conversation_id=str(conversation_id), answers_pending=reopened is not None)
    if reopened is not None:
        await queue_handed_back(sessions, redis, conversation_id)
    await _after(redis, who, conversation_id, "status", send=bool(notices))


async def transfer(
    sessions: async_sessionmaker[AsyncSession],
    redis: Any,
    *,
    who: Actioner,
    conversation_id: uuid.UUID,
    to: str,
) -> str:
    """Give the conversation to ``to``: ``user:<uuid>`` (a console user of the tenant), ``agent:<uuid>``
    (a WhatsApp agent of the tenant, who must be online and gets the assignment notice on WhatsApp) or
    ``team:<uuid>`` (a team: its least-loaded online agent gets it and the notice, else it waits for
    one of them; see :func:`~switchboard.handoff.assignment.give_to_team`), from whoever has it (the AI,
    the queue, a person); returns what happened, for the person ("Assigned to Nia Costa." from the AI
    or the queue, "Transferred to Nia Costa." from a person, "Given to the team Sales: Nia Costa has
    it." for a team).

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: unknown target, offline agent, inactive user, closed conversation.
    """
    kind, _, raw_id = to.partition(":")
    try:
        target_id = uuid.UUID(raw_id)
    except ValueError:
        raise ActionRefused("Choose a person to transfer to.") from None
    trace_id = _trace("transfer")
    agent_id: uuid.UUID | None = None
    previous_notice: list[Outgoing] = []
    team_result: str | None = None
    async with session_scope(sessions) as session:
        conversation = await _locked(session, who, conversation_id)
        if conversation.status == ConversationStatus.closed.value:
            raise ActionRefused("This conversation is closed.")
        # from a person it is a transfer; from the AI or the queue, an assignment (the agent's notice says which)
        had_person = conversation.assigned_agent_id is not None or conversation.assigned_user_id is not None
        try:
            if kind == "user":
                target = await session.get(ConsoleUser, target_id)
                if target is None or target.tenant_id != who.tenant_id or not target.is_active:
                    raise ActionRefused("No such person in this business.")
                name = target.name or target.email
                previous = await hand_to_console_user(
                    session,
                    conversation,
                    user_id=target.id,
                    reason=f"transferred in the console by {who.name} to {target.name or target.email}",
                    trace_id=trace_id,
                )
                if previous is not None:
                    previous_notice.append(
                        agent_outgoing(
                            previous, f"{who.name} moved a conversation to the web console.", conversation.id
                        )
                    )
            elif kind == "agent":
                agent = await session.get(HumanAgent, target_id, with_for_update=True)
                if agent is None or agent.tenant_id != who.tenant_id:
                    raise ActionRefused("No such agent in this business.")
                if agent.status != "online":
                    raise ActionRefused(f"{agent.name} is offline: choose someone online.")
                await hand_to_agent(
                    session,
                    conversation,
                    agent=agent,
                    actor=who.actor,
                    reason=f"transferred in the console by {who.name} to {agent.name}",
                    trace_id=trace_id,
                )
                agent_id, name = agent.id, agent.name
            elif kind == "team":
                team = await session.get(Team, target_id)
                if team is None or team.tenant_id != who.tenant_id:
                    raise ActionRefused("No such team in this business.")
                had_agent = conversation.assigned_agent_id
                given = await give_to_team(
                    session,
                    conversation,
                    team=team,
                    actor=who.actor,
                    reason=f"given in the console by {who.name}{TEAM_REASON}{team.name}",
                    trace_id=trace_id,
                )
                if given is not None:
                    agent_id = given.id
                    team_result = f"Given to the team {team.name}: {given.name} has it."
                elif (
                    conversation.assigned_agent_id is not None and conversation.assigned_agent_id == had_agent
                ):
                    team_result = f"Given to the team {team.name}: its member who has it keeps it."
                else:
                    team_result = (
                        f"Given to the team {team.name}: it waits for one of its agents to be online."
                    )
                name = team.name
            else:
                raise ActionRefused("Choose a person to transfer to.")
        except InvalidTransition:
            raise ActionRefused("This conversation cannot be transferred now.") from None
        if previous_notice:
            await write_outgoing(session, tenant_id=who.tenant_id, items=previous_notice, trace_id=trace_id)
    if agent_id is not None:
        notices = await notices_for_assignments(
            sessions,
            None,
            agent_id=agent_id,
            conversation_ids=[conversation_id],
            trace_id=trace_id,
            transfer_from=who.name if had_person else None,
            assigned_by=None if had_person else who.name,
        )
        async with session_scope(sessions) as session:
            await write_outgoing(session, tenant_id=who.tenant_id, items=notices, trace_id=trace_id)
    log.info("console_transfer", conversation_id=str(conversation_id), to_kind=kind, to_id=str(target_id))
    await _after(redis, who, conversation_id, "status", send=bool(agent_id is not None or previous_notice))
    return team_result or f"{'Transferred' if had_person else 'Assigned'} to {name}."


async def close(
    sessions: async_sessionmaker[AsyncSession],
    redis: Any,
    *,
    who: Actioner,
    conversation_id: uuid.UUID,
    quietly: bool = False,
) -> None:
    """Close the conversation, from the AI or from a person (one "Closed by" event: it keeps who handled
    it, and the AI is not told it was handed back); the customer's next message opens a new one, and gets
    the tenant's farewell (``handoff.farewell``) when it has one, and the rating question. A WhatsApp
    agent who had it is told. Closing a closed conversation changes nothing.

    Args:
        quietly: no farewell and no rating question (the channel account is being disconnected: nothing
            could reach the customer through it).

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: an agent's own console.
    """
    trace_id = _trace("close")
    notices: list[Outgoing] = []
    async with session_scope(sessions) as session:
        conversation = await _locked(session, who, conversation_id)
        if conversation.is_agent_console:
            raise ActionRefused("An agent's own chat with the business cannot be closed.")
        agent = None
        if conversation.status == ConversationStatus.human.value and conversation.assigned_agent_id:
            agent = await session.get(HumanAgent, conversation.assigned_agent_id, with_for_update=True)
        if agent is not None:
            customer = await session.get(Customer, conversation.customer_id)
            label = customer_label(customer) if customer else "The customer"
            notices.append(agent_outgoing(agent, f"{label} was closed by {who.name}.", conversation.id))
        closing = conversation.status != ConversationStatus.closed.value
        farewell = await _farewell(session, who, conversation) if closing and not quietly else None
        if farewell is not None:
            notices.append(farewell)
        if notices:  # written first: the customer reads the farewell before the satisfaction question
            await write_outgoing(session, tenant_id=who.tenant_id, items=notices, trace_id=trace_id)
        closed = await close_conversation(
            session,
            conversation,
            actor=who.actor,
            reason="closed in the console",
            trace_id=trace_id,
            ask_rating=not quietly,
            by_person=True,
        )
        if agent is not None:
            await closed_by_person(session, agent, conversation.id)
    log.info("console_close", conversation_id=str(conversation_id))
    # closing wrote the satisfaction question too (conversations.csat), when it closed it now
    await _after(
        redis, who, conversation_id, "status", send=bool(notices) or (closed is not None and not quietly)
    )


async def _farewell(session: AsyncSession, who: Actioner, conversation: Conversation) -> Outgoing | None:
    """The tenant's farewell to the customer of a conversation closed now (kept in its history), or
    ``None`` when the tenant has none."""
    text = (await load_tenant_settings(session, who.tenant_id)).handoff.farewell.strip()
    customer = await session.get(Customer, conversation.customer_id)
    if not text or customer is None:
        return None
    to = customer_address(customer)
    proxy = {"event": "farewell", "agent_name": who.name, "relayed_to": to}
    append_message(
        session,
        conversation=conversation,
        role=MessageRole.human_agent,
        text=text,
        proxy_metadata=proxy,
        trace_id=None,
    )
    return Outgoing("customer", to, text, conversation.id, proxy=proxy, purpose=OutboxPurpose.notice)


async def reopen(
    sessions: async_sessionmaker[AsyncSession], redis: Any, *, who: Actioner, conversation_id: uuid.UUID
) -> str:
    """Open a closed conversation again, the AI answering (take it over to answer yourself); returns
    what the page says.

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: not closed, or the customer has a newer open conversation.
    """
    async with session_scope(sessions) as session:
        conversation = await _locked(session, who, conversation_id)
        if conversation.status != ConversationStatus.closed.value:
            raise ActionRefused("This conversation is open already.")
        try:
            await reopen_conversation(
                session,
                conversation,
                actor=who.actor,
                reason=f"reopened in the console by {who.name}",
                trace_id=_trace("reopen"),
            )
        except InvalidTransition:
            raise ActionRefused(
                "This customer has a newer open conversation: continue there (the inbox lists it)."
            ) from None
    log.info("console_reopen", conversation_id=str(conversation_id))
    await _after(redis, who, conversation_id, "status")
    return "Reopened: the AI answers the customer's next message; take it over to answer yourself."


async def note(
    sessions: async_sessionmaker[AsyncSession],
    redis: Any,
    *,
    who: Actioner,
    conversation_id: uuid.UUID,
    text: str,
) -> str:
    """Keep a private note on the conversation (whoever has it, even closed): shown in the thread, never
    sent, never read by the model (:mod:`switchboard.conversations.notes`); returns what the page says.

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: empty or too long, or no user acting.
    """
    if who.user is None:
        raise ActionRefused("Only a logged-in person can keep a note.")
    async with session_scope(sessions) as session:
        conversation = await session.get(Conversation, conversation_id)
        if conversation is None or conversation.tenant_id != who.tenant_id:
            raise LookupError("conversation not found")
        try:
            add_note(session, conversation=conversation, text=text, author_name=who.name, user_id=who.user.id)
        except ValueError as exc:
            raise ActionRefused(f"{exc}.") from None
    log.info("console_note", conversation_id=str(conversation_id), user_id=str(who.user.id))
    await _after(redis, who, conversation_id, "note")
    return "Note kept: only your team sees it."


async def decide(
    sessions: async_sessionmaker[AsyncSession],
    redis: Any,
    *,
    who: Actioner,
    conversation_id: uuid.UUID,
    action_id: uuid.UUID,
    approve: bool,
    reason: str | None = None,
) -> str:
    """Approve (the tool runs now, with the stored arguments and idempotency key) or reject a pending
    action of this conversation; returns what happened, for the person.

    Who may: anyone of the tenant with the inbox (the console shows the action on its conversation).

    Raises:
        LookupError: not this tenant's conversation.
        ActionRefused: already decided, the tool is disabled or refused (nothing changed).
    """
    decider = Decider(
        tenant_id=who.tenant_id,
        actor="console_user" if who.user else "admin",
        id=who.user.id if who.user else uuid.UUID(int=0),
        name=who.name,
        may_decide=lambda c: c is not None and c.id == conversation_id,
    )
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        if conversation is None or conversation.tenant_id != who.tenant_id:
            raise LookupError("conversation not found")
    try:
        answer = await decide_pending_action(
            sessions, agent=decider, ref=action_id.hex, approve=approve, reason=(reason or "").strip() or None
        )
    except ApprovalError as exc:
        raise ActionRefused(str(exc)) from None
    await _after(redis, who, conversation_id, "status")
    return answer
