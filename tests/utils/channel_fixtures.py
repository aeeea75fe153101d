"""Fixtures the channel and inbound-job tests share: a scripted offline model, the session's orchestrator and
the scratch database (``graph_sandbox`` and ``make_settings`` are the whole suite's: tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.utils.agent import deployment, unique_model
from tests.utils.model_fixtures import offline_model  # noqa: F401  (fixture)

__all__ = ["e2e_settings", "model", "offline_model", "scratch_settings"]


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
