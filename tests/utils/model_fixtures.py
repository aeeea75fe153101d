"""Fixtures for model and orchestrator tests (imported by the conftest of tests/agent and tests/llm)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from switchboard.agent import Orchestrator
from switchboard.crypto import CredentialCipher
from switchboard.llm.router import ModelGateway
from switchboard.standins.offline_server import OfflineModelState, create_offline_app

from tests.utils.servers import serve_app


@pytest.fixture(scope="session")
def offline_model() -> Iterator[tuple[OfflineModelState, str]]:
    """``(state, base_url)`` of one offline server for the session; tests use unique model names."""
    state = OfflineModelState()
    with serve_app(create_offline_app(state, enable_control=True)) as url:
        yield state, url
        state.release_hangs.set()


@pytest.fixture
def gateway(settings) -> ModelGateway:  # type: ignore[no-untyped-def]
    return ModelGateway(
        settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode())
    )


@pytest.fixture
def orchestrator(sessions, gateway) -> Orchestrator:  # type: ignore[no-untyped-def]
    return Orchestrator(sessions=sessions, gateway=gateway)
