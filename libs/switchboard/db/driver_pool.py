"""A plain asyncpg pool for one hot statement (the webhook's insert), beside the SQLAlchemy engine.

Why not the engine's pool: every ``AsyncEngine.connect()`` and ``close()`` runs the sync pool in a
new greenlet (``greenlet_spawn``), and CPython 3.11 gives each new greenlet a fresh 16 KB frame
stack from ``mmap`` that is unmapped when it ends: ~4 ``mmap``/``munmap`` calls and their page
faults per delivery (``strace -c`` of the WhatsApp service under load: ~3.7 of each per post), plus SQLAlchemy's checkout,
reset-on-return and our FIFO gate. This pool hands out asyncpg connections directly.

The connections run nothing but autocommit statements (no ``SET``, ``LISTEN``, advisory lock,
prepared-cursor or temp table): asyncpg's default release reset (``RESET ALL; UNLISTEN *; ...``, a
round trip per release) is replaced by none; an open transaction, which our statements never leave,
would still be rolled back by asyncpg itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.engine import make_url

from switchboard.db.engine import to_async_url

__all__ = ["DriverPool", "open_driver_pool", "driver_dsn"]


def driver_dsn(url: str) -> str:
    """``url`` (any Postgres URL form) as a DSN asyncpg reads (``postgresql://``, query kept)."""
    return make_url(to_async_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


async def _no_session_state(_connection: asyncpg.Connection) -> None:
    """The release reset: nothing (see the module docstring)."""


class DriverPool:
    """At most ``size`` asyncpg connections, opened on first use and kept, behind a FIFO gate.

    The gate (``asyncio.Semaphore``, FIFO-fair since CPython 3.11) is as wide as the pool, so at most
    ``size`` callers ever wait in asyncpg's own queue, an ``asyncio.Queue`` that lets a newcomer
    take a connection just handed back while a woken waiter goes to the back of the line (with
    hundreds of deliveries for 20 connections some waited seconds: ``loadtests/webhook_vs_floor.py``).
    """

    def __init__(self, pool: asyncpg.Pool, size: int) -> None:
        self.pool = pool
        self.size = size
        self._gate = asyncio.Semaphore(size)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """One connection for the ``async with`` block, returned to the pool after it.

        Raises:
            OSError / asyncpg.PostgresError / asyncpg.InterfaceError: the database cannot be reached
                (a connect fails) or the connection broke; a broken connection is not handed out
                again (asyncpg replaces it on the next checkout).
        """
        async with self._gate, self.pool.acquire() as conn:
            yield conn

    async def close(self) -> None:
        """Close every connection (waits for the ones in use to come back)."""
        await self.pool.close()


async def open_driver_pool(url: str, *, size: int) -> DriverPool:
    """A :class:`DriverPool` on ``url``; opens no connection yet (a database that is down at start-up
    fails the first checkout, not the service's start)."""
    pool = await asyncpg.create_pool(driver_dsn(url), min_size=0, max_size=size, reset=_no_session_state)
    return DriverPool(pool, size)
