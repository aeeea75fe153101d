"""Rows of one tenant, read back for assertions."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.models import Message, Outbox


async def messages_of(sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID) -> list[Message]:
    """Every message of the tenant, oldest first."""
    async with sessions() as session:
        rows = await session.exec(
            select(Message).where(Message.tenant_id == tenant_id).order_by(col(Message.created_at))
        )
        return list(rows.all())


async def outbox_of(sessions: async_sessionmaker[AsyncSession], tenant_id: uuid.UUID) -> list[Outbox]:
    """Every outbox row of the tenant, oldest first, parts of one reply in order."""
    async with sessions() as session:
        rows = await session.exec(
            select(Outbox)
            .where(Outbox.tenant_id == tenant_id)
            .order_by(col(Outbox.created_at), col(Outbox.part_index))
        )
        return list(rows.all())
