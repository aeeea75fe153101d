"""Human agents of a tenant: add, list, find by phone, go online/offline (admin API and CLI use these)."""

from __future__ import annotations

import uuid

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import AgentStatus, HumanAgent
from switchboard.errors import SwitchboardError
from switchboard.validation import check_text, normalize_phone_e164

__all__ = [
    "AgentExists",
    "AgentNotFound",
    "normalize_phone",
    "add_agent",
    "list_agents",
    "agent_by_phone",
    "find_agent",
    "remove_agent",
    "AgentBusy",
]


class AgentExists(SwitchboardError):
    """The tenant already has an agent with this phone number."""

    def __init__(self, phone: str) -> None:
        self.phone = phone
        super().__init__(f"an agent with phone {phone} already exists for this tenant")


class AgentBusy(SwitchboardError):
    """The agent still handles conversations: hand them back (``/end``) or transfer them first."""

    def __init__(self, name: str, open_conversations: int) -> None:
        self.name = name
        self.open_conversations = open_conversations
        super().__init__(
            f"{name} still has {open_conversations} open conversation(s): end or transfer them first "
            "(/end or /transfer from their WhatsApp)"
        )


class AgentNotFound(SwitchboardError):
    """No agent of this tenant matches the name or phone given."""

    def __init__(self, query: str) -> None:
        self.query = query
        super().__init__(f"no agent named or numbered {query!r}")


def normalize_phone(phone: str) -> str:
    """``"+1 (555) 010-2030"`` → ``"15550102030"``: E.164 digits without ``+`` (WhatsApp ``wa_id`` form).

    Raises:
        ValueError: not a possible international number (``phonenumbers``: country code and length).
    """
    try:
        return normalize_phone_e164(phone, require_valid=False).removeprefix("+")
    except ValueError:
        raise ValueError(
            f"invalid phone {phone!r}: use the international number, e.g. +15550102030"
        ) from None


async def add_agent(
    session: AsyncSession, *, tenant_id: uuid.UUID, name: str, phone: str, online: bool = False
) -> HumanAgent:
    """Create a human agent (offline unless ``online``).

    Raises:
        ValueError: empty name or malformed phone.
        AgentExists: the phone is taken in this tenant.
    """
    name = check_text(name, field="name", max_length=200)
    agent = HumanAgent(
        tenant_id=tenant_id,
        name=name,
        phone=normalize_phone(phone),
        status=(AgentStatus.online if online else AgentStatus.offline).value,
    )
    try:
        async with session.begin_nested():
            session.add(agent)
            await session.flush()
    except IntegrityError:
        raise AgentExists(agent.phone) from None
    return agent


async def list_agents(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[HumanAgent]:
    """The tenant's agents by name."""
    rows = await session.exec(
        select(HumanAgent).where(HumanAgent.tenant_id == tenant_id).order_by(col(HumanAgent.name))
    )
    return list(rows.all())


async def agent_by_phone(session: AsyncSession, *, tenant_id: uuid.UUID, phone: str) -> HumanAgent | None:
    """The tenant's agent writing from ``phone`` (any format), or ``None``."""
    try:
        digits = normalize_phone(phone)
    except ValueError:
        return None
    return (
        await session.exec(
            select(HumanAgent).where(HumanAgent.tenant_id == tenant_id, HumanAgent.phone == digits)
        )
    ).first()


async def find_agent(session: AsyncSession, *, tenant_id: uuid.UUID, query: str) -> HumanAgent:
    """An agent by phone (any format) or by name (case-insensitive, exact, else a unique prefix).

    Raises:
        AgentNotFound: nothing matches, or a name prefix matches several agents.
    """
    query = (query or "").strip()
    agent = await agent_by_phone(session, tenant_id=tenant_id, phone=query)
    if agent is not None:
        return agent
    agents = await list_agents(session, tenant_id=tenant_id)
    exact = [a for a in agents if a.name.casefold() == query.casefold()]
    if len(exact) == 1:
        return exact[0]
    prefix = [a for a in agents if a.name.casefold().startswith(query.casefold())] if query else []
    if len(prefix) == 1:
        return prefix[0]
    raise AgentNotFound(query)


async def remove_agent(session: AsyncSession, *, tenant_id: uuid.UUID, query: str) -> HumanAgent:
    """Delete the agent found by phone or name (:func:`find_agent`); conversations and messages they
    handled keep their history (the references become ``NULL``). The caller commits.

    Raises:
        AgentNotFound: nothing matches.
        AgentBusy: a conversation is still assigned to them in human mode.
    """
    from sqlalchemy import func

    from switchboard.db.models import Conversation, ConversationStatus

    agent = await find_agent(session, tenant_id=tenant_id, query=query)
    open_count = (
        await session.exec(
            select(func.count())
            .select_from(Conversation)
            .where(
                Conversation.tenant_id == tenant_id,
                Conversation.assigned_agent_id == agent.id,
                Conversation.status == ConversationStatus.human.value,
            )
        )
    ).one()
    if open_count:
        raise AgentBusy(agent.name, int(open_count))
    await session.delete(agent)
    await session.flush()
    return agent
