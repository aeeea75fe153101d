"""Alembic environment: runs migrations on the async engine (asyncpg)."""

from __future__ import annotations

import asyncio

import switchboard.db.models  # noqa: F401  (registers every table on SQLModel.metadata)
from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool
from sqlmodel import SQLModel
from switchboard.db.engine import to_async_url
from switchboard.db.migrate import include_object

config = context.config
target_metadata = SQLModel.metadata


def _do_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(to_async_url(config.get_main_option("sqlalchemy.url")), poolclass=NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_do_run)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
