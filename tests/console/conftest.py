"""The console service in-process (its lifespan opened), clients on it, and a WhatsApp tenant whose
agent answers through a scripted deployment (for the flows that start with a customer's message)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.llm.offline_server import DeploymentScript

from services.console.main import create_app
from tests.utils.agent import answer_with_script
from tests.utils.model_fixtures import offline_model  # noqa: F401  (fixture)
from tests.utils.whatsapp import connect_whatsapp


@pytest.fixture
def console_settings(make_settings: Callable[..., Any], settings: Any, orchestrator_url: str) -> Any:
    """Settings of one test with the session's orchestrator (turns are answered)."""
    return make_settings(orchestrator_port=settings.orchestrator_port)


@pytest.fixture
async def console_app(console_settings: Any) -> AsyncIterator[Any]:
    app = create_app(console_settings)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def console_client(console_app: Any) -> Callable[..., httpx.AsyncClient]:
    """``async with console_client() as client``: a fresh cookie jar on the console app, from its own
    client address (the login limit counts per IP; tests must not share one)."""

    def make(ip: str | None = None, **headers: str) -> httpx.AsyncClient:
        address = ip or f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=console_app, client=(address, 40000)),
            base_url="http://console.test",
            headers={"Accept": "text/html", **headers},
        )

    return make


@dataclass
class ShopWithWhatsApp:
    tenant: Tenant
    account: ChannelAccount
    phone_number_id: str
    script: DeploymentScript


@pytest.fixture
async def shop(make_tenant, sessions, settings, offline_model) -> ShopWithWhatsApp:  # type: ignore[no-untyped-def]  # noqa: F811
    """A tenant with a WhatsApp number of its own whose agent answers through a scripted deployment."""
    tenant = await make_tenant("Console Shop")
    account = await connect_whatsapp(sessions, tenant, settings)
    script = await answer_with_script(sessions, tenant.id, offline_model)
    return ShopWithWhatsApp(tenant, account, account.external_account_id, script)
