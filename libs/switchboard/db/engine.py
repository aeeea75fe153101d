"""Async SQLAlchemy engine and sessions on asyncpg."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = ["to_async_url", "create_engine", "session_factory", "session_scope"]


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
) -> AsyncEngine:
    """An async engine for ``url`` (any Postgres URL form; see :func:`to_async_url`).

    Args:
        url: database URL.
        pool_size: connections kept open.
        max_overflow: connections opened beyond ``pool_size`` under load and closed when returned
            (default: as many as ``pool_size``). Under steady high concurrency they are opened and
            closed again per request; 0 makes waiters queue for a kept connection instead.
        pre_ping: test each connection with a round trip when it leaves the pool, so a connection the
            server dropped (restart) is replaced silently. Off, that first use fails with a disconnect
            error instead, and SQLAlchemy then recycles every older pooled connection ("Dealing with
            Disconnects", pessimistic vs optimistic handling).
    """
    from switchboard.observability.tracing import instrument_engine

    engine = create_async_engine(
        to_async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_pre_ping=pre_ping,
        echo=echo,
    )
    instrument_engine(engine)  # a span per statement when tracing is on; nothing otherwise
    return engine


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that do not expire objects on commit (safe to read attributes after commit)."""
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def session_scope(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """One session in one transaction: commit on success, roll back on error."""
    async with factory() as session, session.begin():
        yield session
