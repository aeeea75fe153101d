"""Fixtures every channel's tests share: settings on the session's servers, the provider sandboxes,
the session's orchestrator and a scripted offline model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from switchboard.channels.whatsapp import sandbox_router
from switchboard.settings import Settings, load_settings

from tests.utils.agent import deployment, unique_model
from tests.utils.model_fixtures import offline_model  # noqa: F401  (fixture)
from tests.utils.servers import serve_app
from tests.utils.whatsapp import APP_SECRET, VERIFY_TOKEN


@pytest.fixture(scope="session")
def graph_sandbox() -> Iterator[tuple[str, Any]]:
    """The project's Graph API sandbox on a loopback port: ``(base_url, GraphSandbox state)``.

    One for the session: tests read and script only their own number's state (``sent_by``,
    ``read_marks_of``, scripts by ``phone_number_id``, media ids of their own).
    """
    app = FastAPI()
    router = sandbox_router()
    app.include_router(router)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    with serve_app(app) as url:
        yield url + "/_sandbox/graph", router.sandbox  # type: ignore[attr-defined]


@pytest.fixture
def make_settings(settings: Settings, graph_sandbox: tuple[str, Any]) -> Callable[..., Settings]:
    """Settings for one test: the session's servers and ports, the provider sandboxes, fast timings, no
    orchestrator (``e2e_settings`` has one); overrides win."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = dict(
            settings.model_dump(include={
                "database_url", "redis_url", "data_dir", "whatsapp_port", "instagram_port", "gmail_port",
                "mcp_tools_port", "model_server_port", "embedded_redis_port",
            }),
            log_format="console", meta_app_secret=APP_SECRET, meta_verify_token=VERIFY_TOKEN,
            whatsapp_graph_base_url=graph_sandbox[0], inbound_debounce_s=0.0, inbound_retry_defer_s=0.05,
            orchestrator_timeout_s=5.0, inbound_max_tries=3, orchestrator_port=1, whatsapp_sandbox_enabled=False,
            _env_file=None,
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


@pytest.fixture
def e2e_settings(make_settings, settings, orchestrator_url):  # type: ignore[no-untyped-def]
    """``make_settings`` with the session's orchestrator (``orchestrator_url``)."""

    def make(**overrides):  # type: ignore[no-untyped-def]
        return make_settings(orchestrator_port=settings.orchestrator_port, **overrides)

    return make


@pytest.fixture
def scratch_settings(make_settings, scratch_database):  # type: ignore[no-untyped-def]
    """``make_settings`` on the test's own scratch database (``scratch_database``): for jobs that scan
    every tenant's rows (the inbound sweeper), so they see this test's rows and nothing else."""

    def make(**overrides):  # type: ignore[no-untyped-def]
        return make_settings(database_url=scratch_database.url, **overrides)

    return make
