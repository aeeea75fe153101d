"""Checks on the conversations core: the human-mode invariant and the recorded lifecycle events."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.conversations import events_of


async def assert_human_mode_has_owner(
    sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID
) -> None:
    """Every human-mode conversation of the tenant has an assigned agent (who exists and is this
    tenant's), a place in the queue, or is an agent's console; and the agents' loads match."""
    async with sessions() as session:
        orphans = (
            await session.exec(
                text(
                    "SELECT c.id FROM conversations c LEFT JOIN human_agents a "
                    "ON a.id = c.assigned_agent_id AND a.tenant_id = c.tenant_id "
                    "WHERE c.tenant_id = :t AND c.status = 'human' AND NOT c.is_agent_console "
                    "AND (a.id IS NULL) = (c.queued_at IS NULL)"
                ),
                params={"t": tenant_id},
            )
        ).all()
        loads = (
            await session.exec(
                text(
                    "SELECT a.name, a.current_load, count(c.id) FROM human_agents a LEFT JOIN conversations c "
                    "ON c.assigned_agent_id = a.id AND c.status = 'human' "
                    "WHERE a.tenant_id = :t GROUP BY a.id HAVING a.current_load <> count(c.id)"
                ),
                params={"t": tenant_id},
            )
        ).all()
    assert orphans == [], f"human-mode conversations with no agent and no queue place (or both): {orphans}"
    assert loads == [], f"agents whose current_load differs from their human-mode conversations: {loads}"


async def event_rows(
    sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID, conversation_id: uuid.UUID
) -> list[tuple[str | None, str, uuid.UUID | None, str, str | None, str | None]]:
    """``(from_status, to_status, agent_id, actor_type, actor_id, reason)`` of each event, oldest first."""
    async with sessions() as session:
        events = await events_of(session, tenant_id=tenant_id, conversation_id=conversation_id)
    return [(e.from_status, e.to_status, e.agent_id, e.actor_type, e.actor_id, e.reason) for e in events]
