"""Where the database and Redis are, and the shared clients a process opens on them."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis, RedisSettings, create_pool
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.driver_pool import DriverPool, open_driver_pool
from switchboard.db.engine import create_engine, session_factory
from switchboard.errors import SettingsError
from switchboard.runtime.embedded import EmbeddedPostgres
from switchboard.settings import Settings

__all__ = [
    "Resources",
    "open_resources",
    "require_database_url",
    "require_redis_url",
    "database_url_for",
    "read_run_state",
    "live_run_state",
]


def read_run_state(settings: Settings) -> dict[str, Any] | None:
    """The state ``switchboard run`` wrote to ``DATA_DIR/run.json``, or ``None`` if it is not running."""
    try:
        return json.loads(settings.run_state_path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def live_run_state(settings: Settings) -> dict[str, Any] | None:
    """:func:`read_run_state`, but only while the ``switchboard run`` that wrote it is alive (its pid answers)."""
    state = read_run_state(settings)
    return state if state and _pid_alive(state.get("pid")) else None


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def require_database_url(settings: Settings) -> str:
    """``DATABASE_URL`` for a service process.

    Raises:
        SettingsError: unset. Services do not start servers; ``switchboard run`` does and passes the URL.
    """
    if not settings.database_url:
        raise SettingsError("DATABASE_URL", "not set: start services with `switchboard run`, or set it")
    return settings.database_url


def require_redis_url(settings: Settings) -> str:
    """``REDIS_URL`` for a service process (see :func:`require_database_url`)."""
    if not settings.redis_url:
        raise SettingsError("REDIS_URL", "not set: start services with `switchboard run`, or set it")
    return settings.redis_url


@contextmanager
def database_url_for(settings: Settings, *, create: bool = False) -> Iterator[str]:
    """A database URL for a one-off command (``switchboard db upgrade``, ``tenant create``...).

    ``DATABASE_URL`` when set; otherwise the embedded server under ``DATA_DIR``, attached to when
    ``switchboard run`` already runs it, else started for the command and stopped afterwards.

    Args:
        create: allow creating a new embedded database (``db upgrade``). Other commands refuse,
            so a command typed in the wrong folder does not quietly make an empty database there.

    Raises:
        SettingsError: no embedded database in ``DATA_DIR`` and ``create`` is false.
    """
    if settings.database_url:
        yield settings.database_url
        return
    pg = EmbeddedPostgres(settings.data_dir / "postgres")
    if not create and not (pg.data_dir / "PG_VERSION").exists():
        raise SettingsError(
            "DATA_DIR",
            f"no Switchboard database in {settings.data_dir.resolve()}: run commands from the folder where "
            "you ran `make run` (or set DATA_DIR or DATABASE_URL); `switchboard db upgrade` creates a new one",
        )
    url = pg.start()
    try:
        yield url
    finally:
        pg.stop(only_if_started_here=True)


@dataclass
class Resources:
    """Clients a service process shares: the engine, a session factory and the ARQ Redis pool."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: ArqRedis | None
    driver: DriverPool | None = None
    """A plain asyncpg pool for the webhook's insert (``open_resources(db_driver_pool=N)``), else None."""


@asynccontextmanager
async def open_resources(
    settings: Settings,
    *,
    with_redis: bool = True,
    db_pre_ping: bool = True,
    db_pool: tuple[int, int] | None = None,
    db_driver_pool: int = 0,
) -> AsyncIterator[Resources]:
    """Open the engine (and the ARQ pool) for a service's lifespan; close them on exit.

    ``db_pre_ping``, ``db_pool`` (``pool_size``, ``max_overflow``): see :func:`switchboard.db.engine.create_engine`.
    ``db_driver_pool``: when above 0, also a :class:`~switchboard.db.driver_pool.DriverPool` of that
    many connections (``Resources.driver``; a webhook service's insert).

    Raises:
        SettingsError: ``DATABASE_URL`` or ``REDIS_URL`` unset.
    """
    size, overflow = db_pool or (10, None)
    engine = create_engine(
        require_database_url(settings), pre_ping=db_pre_ping, pool_size=size, max_overflow=overflow
    )
    redis = None
    driver = None
    try:
        if with_redis:
            redis = await create_pool(RedisSettings.from_dsn(require_redis_url(settings)))
        if db_driver_pool > 0:
            driver = await open_driver_pool(require_database_url(settings), size=db_driver_pool)
        yield Resources(
            settings=settings, engine=engine, sessions=session_factory(engine), redis=redis, driver=driver
        )
    finally:
        if redis is not None:
            await redis.aclose()
        if driver is not None:
            await driver.close()
        await engine.dispose()
