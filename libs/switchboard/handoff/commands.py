"""Slash commands from human agents' WhatsApp: parsing (pure) and their effects on the database.

Commands are case-insensitive (``/STATUS`` = ``/status``). A malformed or unknown command is answered
with a helpful line and changes nothing. :func:`run_command` returns the messages to send (to the
agent, to the customer, to another agent); the caller stores them with
:func:`switchboard.handoff.notices.write_outgoing` keyed by the agent's inbound message.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC

from sqlalchemy import String, cast, func
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.conversations import Actor, InvalidTransition, add_note, append_message
from switchboard.conversations import reopen as reopen_conversation
from switchboard.db.engine import session_scope
from switchboard.db.models import (
    AgentStatus,
    Conversation,
    ConversationStatus,
    Customer,
    HumanAgent,
    MessageRole,
    Outbox,
    OutboxPurpose,
    utcnow,
)
from switchboard.errors import SwitchboardError
from switchboard.handoff.agents import AgentNotFound, find_agent
from switchboard.handoff.approvals import ApprovalError, decide_pending_action, pending_actions_for
from switchboard.handoff.assignment import (
    open_conversations_of,
    pick_agent,
    queue_length,
    release,
    take_queue,
    tenant_handoff_lock,
    transfer,
)
from switchboard.handoff.canned import (
    SHORTCUT_PATTERN,
    canned_replies,
    customer_name,
    fill_canned,
    find_canned,
)
from switchboard.handoff.handback import reopen_unanswered
from switchboard.handoff.notices import (
    Outgoing,
    agent_outgoing,
    conversation_reference,
    customer_address,
    customer_label,
)
from switchboard.handoff.pending import APPROVAL_NOTICE_PREFIX, describe, pending_action_notices
from switchboard.handoff.service import notices_for_assignments
from switchboard.llm.router import ModelGateway
from switchboard.observability import get_logger

__all__ = [
    "Command",
    "CommandError",
    "COMMANDS",
    "HELP_TEXT",
    "HANDED_BACK_NOTE",
    "parse_command",
    "run_command",
    "selected_conversation",
    "set_status",
]

log = get_logger(__name__)

COMMANDS: dict[str, str] = {
    "status": "/status - what you are handling, since when, and how many customers wait",
    "switch": "/switch N - choose which customer your messages go to (N from /status)",
    "transfer": "/transfer [name or phone] - pass the current customer to a colleague (default: least busy)",
    "end": "/end - hand the current customer back to the AI assistant",
    "online": "/online - start receiving customers (you also get everyone waiting)",
    "offline": "/offline - stop receiving customers (transfer or end yours first)",
    "r": "/r shortcut - send a canned reply to your current customer (the console lists them)",
    "note": "/note text - keep a private note on your current customer's conversation (never sent to them)",
    "reopen": "/reopen REF - open a closed conversation again, the AI answering (REF: the Ref of its notice)",
    "approve": "/approve ID - run an action waiting for your approval (IDs in /status)",
    "reject": "/reject ID [reason] - refuse an action waiting for your approval",
    "help": "/help - this list",
}
"""Command name → one line of help (the order of ``/help``)."""
HELP_TEXT = (
    "Commands:\n"
    + "\n".join(COMMANDS.values())
    + ("\nAny other message goes to your current customer; reply to a customer's message to answer that one.")
)
_REFERENCE = re.compile(r"#?[0-9A-Za-z-]{8,36}")
"""A conversation's reference as typed: 8 letters and digits or more (its id's first hex digits, or the whole id);
any such word is looked up, so one that is no conversation's is answered as unknown, not as malformed."""
_NO_ARGUMENTS = frozenset({"status", "end", "online", "offline", "help"})
HANDED_BACK_NOTE = "[A person from the team handled this conversation and has now handed it back to you.]"
"""Stored as a ``human_agent`` message on ``/end`` so the AI's next turn knows a human handled it."""


class CommandError(SwitchboardError):
    """A command the agent mistyped; the message is the help the agent receives."""


@dataclass(frozen=True)
class Command:
    """A parsed slash command."""

    name: str
    """Lower-case command name without the slash (a key of :data:`COMMANDS`)."""
    argument: str = ""
    """Everything after the name, stripped."""
    number: int | None = None
    """``/switch N``: N (1-based)."""


def parse_command(text: str) -> Command | None:
    """``"/Switch 2"`` → ``Command("switch", "2", 2)``; ``None`` when ``text`` is not a command.

    Raises:
        CommandError: unknown command or wrong arguments (the message says what to write instead).
    """
    stripped = (text or "").strip()
    if not stripped.startswith("/") or stripped.startswith("//") or len(stripped) < 2:
        return None
    head, _, rest = stripped[1:].partition(" ")
    name, argument = head.strip().casefold(), rest.strip()
    if name not in COMMANDS:
        raise CommandError(f"Unknown command /{head}. {HELP_TEXT}")
    if name in _NO_ARGUMENTS and argument:
        raise CommandError(f"/{name} takes no arguments. Usage: {COMMANDS[name]}")
    if name in ("approve", "reject"):
        ref, _, reason = argument.partition(" ")
        if not ref or (name == "approve" and reason.strip()):
            raise CommandError(f"/{name} needs the action id from /status. Usage: {COMMANDS[name]}")
        return Command(name, argument)
    if name == "r" and not SHORTCUT_PATTERN.fullmatch(argument.lstrip("/").casefold()):
        raise CommandError(f"/r needs the shortcut of a canned reply, e.g. /r thanks. Usage: {COMMANDS['r']}")
    if name == "note" and not argument:
        raise CommandError(
            f"/note needs the text to keep, e.g. /note called them back. Usage: {COMMANDS['note']}"
        )
    if name == "reopen" and not _REFERENCE.fullmatch(argument):
        raise CommandError(
            f"/reopen needs the conversation's Ref (8 letters and digits), e.g. /reopen 3f2a9c1e. "
            f"Usage: {COMMANDS['reopen']}"
        )
    if name == "switch":
        if not argument.isdigit() or int(argument) < 1:
            raise CommandError(
                f"/switch needs a number from /status, e.g. /switch 2. Usage: {COMMANDS['switch']}"
            )
        return Command(name, argument, int(argument))
    return Command(name, argument)


async def selected_conversation(
    session: AsyncSession, agent: HumanAgent, *, reply_to_external_id: str | None = None
) -> Conversation | None:
    """The customer conversation an agent's plain message is for.

    A reply (WhatsApp ``context``) to a message relayed to the agent picks that message's conversation
    (and selects it); else the agent's selected conversation; else their only open one; else ``None``.
    """
    open_conversations = await open_conversations_of(session, agent)
    by_id = {c.id: c for c in open_conversations}
    if reply_to_external_id:
        replied = (
            await session.exec(
                select(Outbox.conversation_id).where(
                    Outbox.tenant_id == agent.tenant_id,
                    Outbox.recipient == agent.phone,
                    Outbox.external_id == reply_to_external_id,
                )
            )
        ).first()
        if replied in by_id:
            agent.active_conversation_id = replied
            session.add(agent)
            return by_id[replied]
    if agent.active_conversation_id in by_id:
        return by_id[agent.active_conversation_id]
    if len(open_conversations) == 1:
        return open_conversations[0]
    return None


def _since(conversation: Conversation) -> str:
    when = conversation.assigned_at or conversation.updated_at
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


async def _customer(session: AsyncSession, conversation: Conversation) -> Customer:
    customer = await session.get(Customer, conversation.customer_id)
    assert customer is not None
    return customer


async def run_command(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway | None,
    *,
    agent_id: uuid.UUID,
    command: Command,
    console_conversation_id: uuid.UUID,
    trace_id: str,
) -> list[Outgoing]:
    """Execute ``command`` for the agent; returns what to send (first item: the answer to the agent).

    Args:
        console_conversation_id: the agent's own conversation with the business number (answers that
            are not about a customer are filed under it).

    Raises:
        LookupError: the agent does not exist.
    """
    handlers = {
        "help": _help,
        "status": _status,
        "switch": _switch,
        "end": _end,
        "online": _online,
        "offline": _offline,
        "transfer": _transfer,
        "approve": _decide,
        "reject": _decide,
        "r": _canned,
        "note": _note,
        "reopen": _reopen,
    }
    try:
        return await handlers[command.name](
            sessions, gateway, agent_id, command, console_conversation_id, trace_id
        )
    except CommandError as exc:
        async with sessions() as session:
            agent = await session.get(HumanAgent, agent_id)
        assert agent is not None
        log.info("agent_command_rejected", command=command.name, agent_id=str(agent_id))
        return [agent_outgoing(agent, str(exc), console_conversation_id)]


async def _agent(session: AsyncSession, agent_id: uuid.UUID, *, lock: bool = False) -> HumanAgent:
    query = select(HumanAgent).where(HumanAgent.id == agent_id)
    agent = (await session.exec(query.with_for_update() if lock else query)).first()
    if agent is None:
        raise LookupError(f"agent {agent_id} not found")
    return agent


async def _help(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        agent = await _agent(session, agent_id)
    return [agent_outgoing(agent, HELP_TEXT, console_id)]


async def _status(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        agent = await _agent(session, agent_id)
        conversations = await open_conversations_of(session, agent)
        waiting = await queue_length(session, tenant_id=agent.tenant_id)
        lines = [f"You are {agent.status}. Open conversations: {len(conversations)}."]
        for index, conversation in enumerate(conversations, start=1):
            customer = await _customer(session, conversation)
            marker = " <- current" if conversation.id == agent.active_conversation_id else ""
            lines.append(f"{index}. {customer_label(customer)}, since {_since(conversation)}{marker}")
        lines.append(f"Waiting for an agent: {waiting}.")
        actions = await pending_actions_for(session, agent)
        if actions:
            lines.append("Waiting for your approval (/approve ID or /reject ID reason):")
            lines.extend(describe(action) for action in actions)
    return [agent_outgoing(agent, "\n".join(lines), console_id)]


async def _switch(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id, lock=True)
        conversations = await open_conversations_of(session, agent)
        if not conversations:
            raise CommandError("You have no open conversations to switch to.")
        if command.number > len(conversations):
            raise CommandError(
                f"There is no conversation {command.number}: you have {len(conversations)} (see /status)."
            )
        chosen = conversations[command.number - 1]
        agent.active_conversation_id = chosen.id
        session.add(agent)
        label = customer_label(await _customer(session, chosen))
    return [agent_outgoing(agent, f"Now talking to {label} (#{command.number}).", chosen.id)]


async def _end(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id)
        await tenant_handoff_lock(session, agent.tenant_id)
        agent = await _agent(session, agent_id, lock=True)
        conversation = await selected_conversation(session, agent)
        if conversation is None:
            count = len(await open_conversations_of(session, agent))
            raise CommandError(
                "You have no open conversation."
                if count == 0
                else f"You have {count} open conversations: choose one with /switch N first."
            )
        label = customer_label(await _customer(session, conversation))
        await release(
            session, conversation, agent, actor=Actor.agent(agent.id), reason="/end", trace_id=trace_id
        )
        append_message(
            session,
            conversation=conversation,
            role=MessageRole.human_agent,
            kind="system",
            text=HANDED_BACK_NOTE,
            proxy_metadata={"event": "handed_back", "agent_id": str(agent.id), "agent_name": agent.name},
            trace_id=trace_id,
        )
        conversation_id = conversation.id
        # queued by the caller once committed (handle_agent_message), or by the inbound sweeper
        await reopen_unanswered(session, conversation_id)
    log.info("handoff_ended", conversation_id=str(conversation_id), agent_id=str(agent_id))
    return [agent_outgoing(agent, f"{label} is back with the AI assistant.", conversation_id)]


async def _current_customer(session: AsyncSession, agent: HumanAgent) -> Conversation:
    """The conversation a command about "the current customer" acts on.

    Raises:
        CommandError: none open, or several and none chosen.
    """
    conversation = await selected_conversation(session, agent)
    if conversation is None:
        count = len(await open_conversations_of(session, agent))
        raise CommandError(
            "You have no open conversation."
            if count == 0
            else f"You have {count} open conversations: choose one with /switch N first."
        )
    return conversation


async def _canned(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    """``/r shortcut``: the tenant's canned reply, filled for the current customer, sent as the agent's."""
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id)
        reply = await find_canned(session, tenant_id=agent.tenant_id, shortcut=command.argument)
        if reply is None:
            shortcuts = [r.shortcut for r in await canned_replies(session, tenant_id=agent.tenant_id)]
            raise CommandError(
                f"There is no canned reply /{command.argument.lstrip('/')}. "
                + (
                    "Yours: " + ", ".join(f"/r {s}" for s in shortcuts) + "."
                    if shortcuts
                    else "An admin adds them on the console's Canned replies page."
                )
            )
        conversation = await _current_customer(session, agent)
        customer = await _customer(session, conversation)
        text = fill_canned(reply.text, customer=customer_name(customer), agent=agent.name)
        to = customer_address(customer)
        proxy = {
            "sender": "human_agent",
            "agent_id": str(agent.id),
            "agent_name": agent.name,
            "relayed_from": agent.phone,
            "relayed_to": to,
            "canned": reply.shortcut,
        }
        append_message(
            session,
            conversation=conversation,
            role=MessageRole.human_agent,
            text=text,
            proxy_metadata=proxy,
            trace_id=trace_id,
        )
        label, conversation_id = customer_label(customer), conversation.id
    log.info("agent_canned_reply", conversation_id=str(conversation_id), agent_id=str(agent_id))
    return [
        agent_outgoing(agent, f"Sent to {label}:\n{text}", console_id),
        Outgoing("customer", to, text, conversation_id, proxy=proxy, purpose=OutboxPurpose.human_reply),
    ]


async def _note(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    """``/note text``: a private note on the current customer's conversation (the console shows it)."""
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id)
        conversation = await _current_customer(session, agent)
        try:
            add_note(
                session,
                conversation=conversation,
                text=command.argument,
                author_name=agent.name,
                agent_id=agent.id,
            )
        except ValueError as exc:
            raise CommandError(f"{exc}.") from None
        label, conversation_id = customer_label(await _customer(session, conversation)), conversation.id
    # filed under the customer's conversation: its delivery refreshes the console pages showing it
    text = f"Note kept on {label}'s conversation (only your team sees it)."
    return [agent_outgoing(agent, text, conversation_id)]


async def _reopen(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    """``/reopen REF``: a closed conversation of the agent's tenant open again, the AI answering (as the
    console's Reopen); refused when it is open, unknown, or its customer has a newer open conversation."""
    prefix = command.argument.lstrip("#").replace("-", "").casefold()
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id)
        await tenant_handoff_lock(session, agent.tenant_id)
        found = (
            await session.exec(
                select(Conversation)
                .where(
                    Conversation.tenant_id == agent.tenant_id,
                    col(Conversation.is_agent_console).is_(False),
                    func.replace(cast(Conversation.id, String), "-", "").startswith(prefix, autoescape=True),
                )
                .limit(2)
                .with_for_update()
            )
        ).all()
        if not found:
            raise CommandError(f"No conversation has the Ref {prefix}. It is in the notice you got for it.")
        if len(found) > 1:
            raise CommandError(f"Several conversations start with {prefix}: type more of the Ref.")
        conversation = found[0]
        label = customer_label(await _customer(session, conversation))
        if conversation.status != ConversationStatus.closed.value:
            raise CommandError(f"{label}'s conversation is open already.")
        try:
            await reopen_conversation(
                session,
                conversation,
                actor=Actor.agent(agent.id),
                reason=f"reopened on WhatsApp by {agent.name}",
                trace_id=trace_id,
            )
        except InvalidTransition:
            raise CommandError(f"{label} has a newer open conversation: continue there.") from None
        conversation_id = conversation.id
    log.info("agent_reopened", conversation_id=str(conversation_id), agent_id=str(agent_id))
    ref = conversation_reference(conversation_id)
    text = f"Reopened {label}'s conversation (Ref {ref}): the AI answers their next message."
    return [agent_outgoing(agent, text, conversation_id)]


async def set_status(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway | None,
    *,
    agent_id: uuid.UUID,
    online: bool,
    trace_id: str,
    actor: Actor | None = None,
) -> list[Outgoing]:
    """Put the agent online (taking every waiting conversation) or offline.

    Args:
        actor: who changes the status, recorded on the conversations taken from the queue (default:
            the agent; the admin API passes :meth:`Actor.api`).

    Returns:
        The notices for conversations taken from the queue and for pending actions that waited for
        an agent (empty when going offline).

    Raises:
        CommandError: going offline while conversations are still open (transfer or end them first).
        LookupError: no such agent.
    """
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id)
        await tenant_handoff_lock(session, agent.tenant_id)
        agent = await _agent(session, agent_id, lock=True)
        taken_ids: list[uuid.UUID] = []
        approvals: list[Outgoing] = []
        if online:
            agent.status = AgentStatus.online.value
            taken = await take_queue(session, agent=agent, actor=actor, trace_id=trace_id)
            taken_ids = [c.id for c in taken]
            session.add(agent)
            await session.flush()
            # actions that waited for somebody to come online (their conversations included)
            approvals = await pending_action_notices(session, tenant_id=agent.tenant_id)
        else:
            count = len(await open_conversations_of(session, agent))
            if count:
                raise CommandError(
                    f"You still have {count} open conversation(s). Hand them over first with /transfer "
                    "(or /end to give them back to the AI), then /offline."
                )
            agent.status = AgentStatus.offline.value
        agent.updated_at = utcnow()
        session.add(agent)
    log.info(
        "agent_status",
        agent_id=str(agent_id),
        status=agent.status,
        taken_from_queue=len(taken_ids),
        approvals_waiting=len(approvals),
    )
    notices = await notices_for_assignments(
        sessions, gateway, agent_id=agent_id, conversation_ids=taken_ids, trace_id=trace_id
    )
    return [*notices, *approvals]


async def _online(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    notices = await set_status(sessions, gateway, agent_id=agent_id, online=True, trace_id=trace_id)
    async with sessions() as session:
        agent = await _agent(session, agent_id)
    approvals = sum(1 for notice in notices if notice.text.startswith(APPROVAL_NOTICE_PREFIX))
    taken = len(notices) - approvals
    answer = "You are online." + (
        f" {taken} waiting conversation(s) are now yours." if taken else " Nobody is waiting."
    )
    if approvals:
        answer += f" {approvals} action(s) wait for approval (see /status)."
    return [agent_outgoing(agent, answer, console_id), *notices]


async def _offline(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    await set_status(sessions, gateway, agent_id=agent_id, online=False, trace_id=trace_id)
    async with sessions() as session:
        agent = await _agent(session, agent_id)
    return [agent_outgoing(agent, "You are offline. Send /online when you are back.", console_id)]


async def _transfer(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        agent = await _agent(session, agent_id)
        await tenant_handoff_lock(session, agent.tenant_id)
        agent = await _agent(session, agent_id, lock=True)
        conversation = await selected_conversation(session, agent)
        if conversation is None:
            count = len(await open_conversations_of(session, agent))
            raise CommandError(
                "You have no open conversation to transfer."
                if count == 0
                else f"You have {count} open conversations: choose one with /switch N first."
            )
        if command.argument:
            try:
                target = await find_agent(session, tenant_id=agent.tenant_id, query=command.argument)
            except AgentNotFound:
                raise CommandError(
                    f"No colleague named or numbered {command.argument!r}. Check the name, or send /transfer alone for the least busy one."
                ) from None
            if target.id == agent.id:
                raise CommandError(
                    "That is you. Name a colleague, or send /transfer alone for the least busy one."
                )
            if target.status != AgentStatus.online.value:
                raise CommandError(
                    f"{target.name} is offline. Choose someone online, or send /transfer alone."
                )
            target = await _agent(session, target.id, lock=True)
        else:
            target = await pick_agent(session, tenant_id=agent.tenant_id, exclude=agent.id)
            if target is None:
                raise CommandError("Nobody else is online right now; the customer stays with you.")
        label = customer_label(await _customer(session, conversation))
        await transfer(
            session,
            conversation,
            from_agent=agent,
            to_agent=target,
            actor=Actor.agent(agent.id),
            trace_id=trace_id,
        )
        conversation_id, target_id, target_name, from_name = (
            conversation.id,
            target.id,
            target.name,
            agent.name,
        )
    log.info(
        "handoff_transferred",
        conversation_id=str(conversation_id),
        from_agent=str(agent_id),
        to_agent=str(target_id),
    )
    out = [agent_outgoing(agent, f"{label} is now with {target_name}.", conversation_id)]
    out += await notices_for_assignments(
        sessions,
        gateway,
        agent_id=target_id,
        conversation_ids=[conversation_id],
        trace_id=trace_id,
        transfer_from=from_name,
    )
    return out


async def _decide(sessions, gateway, agent_id, command, console_id, trace_id) -> list[Outgoing]:  # type: ignore[no-untyped-def]
    ref, _, reason = command.argument.partition(" ")
    async with sessions() as session:
        agent = await _agent(session, agent_id)
    try:
        answer = await decide_pending_action(
            sessions, agent=agent, ref=ref, approve=command.name == "approve", reason=reason.strip() or None
        )
    except ApprovalError as exc:
        raise CommandError(str(exc)) from None
    return [agent_outgoing(agent, answer, console_id)]
