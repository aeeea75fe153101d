"""Async SQLAlchemy engine and sessions on asyncpg."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = ["PING_IDLE_S", "to_async_url", "create_engine", "session_factory", "session_scope"]

PING_IDLE_S = 1.0
"""A pooled connection back in the pool for longer than this (seconds) is pinged before its next use;
one used more recently is not (a hot pool pays no round trips: the asyncpg ping is BEGIN, ``;``,
ROLLBACK). A server restart takes longer than this, so a connection that outlived one is pinged."""
_CHECKED_IN = "switchboard_checked_in"


def to_async_url(url: str) -> str:
    """Rewrite any ``postgres://`` / ``postgresql://`` URL to the asyncpg driver.

    Unix-socket URLs keep their ``?host=/path`` query (asyncpg reads the socket folder from it).
    """
    parsed = make_url(
        url.replace("postgres://", "postgresql://", 1) if url.startswith("postgres://") else url
    )
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    echo: bool = False,
    pre_ping: bool = True,
    max_overflow: int | None = None,
    ping_idle_s: float = PING_IDLE_S,
) -> AsyncEngine:
    """An async engine for ``url`` (any Postgres URL form; see :func:`to_async_url`).

    Args:
        url: database URL.
        pool_size: connections kept open.
        max_overflow: connections opened beyond ``pool_size`` under load and closed when returned
            (default: as many as ``pool_size``). Under steady high concurrency they are opened and
            closed again per request; 0 makes waiters queue for a kept connection instead.
        pre_ping: test a connection with a round trip when it leaves the pool after more than
            ``ping_idle_s`` in it, so a connection the server dropped (restart) is replaced silently and
            every older pooled connection with it (SQLAlchemy's pre-ping, "Dealing with Disconnects",
            pessimistic handling, gated by idle time). Off, that first use fails with a disconnect
            error instead, and SQLAlchemy then recycles every older pooled connection (optimistic).
        ping_idle_s: idle seconds in the pool after which a connection is pinged (:data:`PING_IDLE_S`;
            0 pings on every checkout, as ``pool_pre_ping`` does).
    """
    from switchboard.observability.tracing import instrument_engine

    engine = create_async_engine(
        to_async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_pre_ping=pre_ping and ping_idle_s <= 0,
        echo=echo,
    )
    if pre_ping and ping_idle_s > 0:
        _ping_when_idle(engine, ping_idle_s)
    instrument_engine(engine)  # a span per statement when tracing is on; nothing otherwise
    return engine


def _ping_when_idle(engine: AsyncEngine, idle_s: float) -> None:
    """SQLAlchemy's pre-ping, only for a connection that sat in the pool longer than ``idle_s``.

    A failed ping that is a disconnect invalidates the pool (as ``pool_pre_ping`` does: this and every
    older pooled connection are replaced, the checkout reconnects); any other error propagates.
    """
    dialect = engine.sync_engine.dialect

    @event.listens_for(engine.sync_engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.pop(_CHECKED_IN, None)
        if since is None or time.monotonic() - since <= idle_s:
            return  # fresh from connect(), or used a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as error:
            if isinstance(error, dialect.loaded_dbapi.Error) and dialect.is_disconnect(
                error, dbapi_connection, None
            ):
                raise sa_exc.InvalidatePoolError() from error
            raise


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that do not expire objects on commit (safe to read attributes after commit)."""
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def session_scope(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """One session in one transaction: commit on success, roll back on error."""
    async with factory() as session, session.begin():
        yield session
