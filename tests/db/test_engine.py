"""The engine's idle-gated pre-ping (switchboard.db.engine.create_engine, ``ping_idle_s``)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from switchboard.db.engine import create_engine


async def _backend_pid(engine) -> int:  # type: ignore[no-untyped-def]
    async with engine.connect() as connection:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(database_url: str, pid: int) -> None:
    other = create_engine(database_url, pool_size=1)
    try:
        async with other.connect() as connection:
            assert (
                await connection.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            ).scalar_one()
    finally:
        await other.dispose()
    await asyncio.sleep(0.1)  # the server closes the socket


async def test_idle_connection_is_pinged_and_replaced(database_url: str) -> None:
    """A connection idle longer than ``ping_idle_s`` whose server side died is replaced before use."""
    engine = create_engine(database_url, pool_size=1, max_overflow=0, ping_idle_s=0.2)
    try:
        pid = await _backend_pid(engine)
        await _terminate(database_url, pid)
        await asyncio.sleep(0.3)
        assert await _backend_pid(engine) != pid  # the ping saw the disconnect; a new connection answered
    finally:
        await engine.dispose()


async def test_hot_connection_is_not_pinged(database_url: str) -> None:
    """A connection back in the pool a moment ago is used without a ping: a dead one fails once (the
    pool is invalidated then), and the next checkout has a new connection."""
    engine = create_engine(database_url, pool_size=1, max_overflow=0, ping_idle_s=30)
    try:
        pid = await _backend_pid(engine)
        await _terminate(database_url, pid)
        with pytest.raises(DBAPIError) as caught:
            await _backend_pid(engine)
        assert caught.value.connection_invalidated
        assert await _backend_pid(engine) != pid
    finally:
        await engine.dispose()


async def test_zero_idle_pings_every_checkout(database_url: str) -> None:
    """``ping_idle_s=0`` is SQLAlchemy's plain ``pool_pre_ping``."""
    engine = create_engine(database_url, pool_size=1, max_overflow=0, ping_idle_s=0)
    try:
        pid = await _backend_pid(engine)
        await _terminate(database_url, pid)
        assert await _backend_pid(engine) != pid
    finally:
        await engine.dispose()
