"""Fixtures every channel's tests share: settings on the session's servers, the provider sandboxes,
the real orchestrator on a loopback port and a scripted offline model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from arq.connections import ArqRedis, RedisSettings, create_pool
from fastapi import FastAPI
from switchboard.channels.whatsapp import sandbox_router
from switchboard.settings import Settings, load_settings

from services.orchestrator.main import create_app as create_orchestrator
from tests.utils.agent import deployment, unique_model
from tests.utils.model_fixtures import offline_model  # noqa: F401  (fixture)
from tests.utils.servers import serve_app

APP_SECRET = "test-app-secret"
VERIFY_TOKEN = "test-verify-token"


@pytest.fixture(scope="session")
def graph_sandbox() -> Iterator[tuple[str, Any]]:
    """The project's Graph API sandbox on a loopback port: ``(base_url, GraphSandbox state)``."""
    app = FastAPI()
    router = sandbox_router()
    app.include_router(router)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    with serve_app(app) as url:
        yield url + "/_sandbox/graph", router.sandbox  # type: ignore[attr-defined]


@pytest.fixture
def make_settings(
    database_url: str, redis_url: str, data_dir: Path, graph_sandbox: tuple[str, Any]
) -> Callable[..., Settings]:
    """Settings for one test: real DB/Redis, the provider sandboxes, fast timings; overrides win."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = dict(
            database_url=database_url, redis_url=redis_url, data_dir=data_dir / "state", log_format="console",
            meta_app_secret=APP_SECRET, meta_verify_token=VERIFY_TOKEN, whatsapp_graph_base_url=graph_sandbox[0],
            inbound_debounce_s=0.0, inbound_retry_defer_s=0.05, orchestrator_timeout_s=5.0, inbound_max_tries=3,
            orchestrator_port=1, whatsapp_sandbox_enabled=False, _env_file=None,
        )  # fmt: skip
        values.update(overrides)
        return load_settings(**values)

    return make


@pytest.fixture
def model(offline_model):  # type: ignore[no-untyped-def]  # noqa: F811
    """``(state, model_name, deployment_dict)`` of a fresh scripted deployment."""
    state, url = offline_model
    name = unique_model("wa")
    return state, name, deployment(url, name)


@pytest.fixture(scope="module")
def orchestrator_port(database_url, redis_url, data_dir) -> Iterator[int]:  # type: ignore[no-untyped-def]
    from switchboard.settings import load_settings

    settings = load_settings(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=data_dir / "state",
        log_format="console",
        _env_file=None,
    )
    with serve_app(create_orchestrator(settings)) as url:
        yield int(url.rsplit(":", 1)[1])


@pytest.fixture
def e2e_settings(make_settings, orchestrator_port):  # type: ignore[no-untyped-def]
    def make(**overrides):  # type: ignore[no-untyped-def]
        return make_settings(orchestrator_port=orchestrator_port, **overrides)

    return make


@pytest.fixture
async def arq_pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    yield pool
    await pool.aclose()
