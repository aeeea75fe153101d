"""The console service in-process (its lifespan opened), clients on it, and a WhatsApp tenant whose
agent answers through a scripted deployment (for the flows that start with a customer's message)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from switchboard.db.models import ChannelAccount, Tenant
from switchboard.standins.offline_server import DeploymentScript

from services.console.main import create_app
from tests.utils.agent import answer_with_script
from tests.utils.model_fixtures import offline_model  # noqa: F401  (fixture)
from tests.utils.servers import serve_app
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


# --- Browser tests (Playwright for Python driving Debian's chromium; never `playwright install`) ---

BROWSER_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
SCREENSHOTS = Path(__file__).resolve().parents[1] / "output" / "browser"
"""Where the browser tests save a screenshot of each main page (``tests/output/browser``, not committed)."""


def chromium_path() -> str | None:
    """Debian's chromium (``apt-get install -y chromium``), or ``None``."""
    for candidate in (os.environ.get("CHROMIUM_PATH"), *BROWSER_CANDIDATES, shutil.which("chromium")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    """One headless Chromium for the whole session. No browser: the tests FAIL in CI (``CI=true``) and are
    reported as not run, with the reason, elsewhere."""
    path = chromium_path()
    if path is None:
        reason = "no Chromium at /usr/bin/chromium (install it: apt-get install -y chromium)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"browser tests cannot run in CI: {reason}")
        pytest.skip(f"browser tests not run: {reason}")
    from playwright.async_api import async_playwright

    playwright = await async_playwright().start()
    try:
        chromium = await playwright.chromium.launch(
            executable_path=path, args=["--no-sandbox"], headless=True
        )
        try:
            yield chromium
        finally:
            await chromium.close()
    finally:
        await playwright.stop()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    """A fresh browser context (its own cookies) and page; 15 s per wait."""
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    page = await context.new_page()
    try:
        yield page
    finally:
        await context.close()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``await screenshot(page, "inbox")`` saves ``tests/output/browser/<name>.png`` and prints the path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    async def take(page: Any, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")  # noqa: T201 (the test output names where it is)
        return path

    return take


@pytest.fixture
async def console_url(console_settings: Any) -> AsyncIterator[str]:
    """The console service over HTTP on a free port (a browser needs a real server)."""
    async with serve_app(create_app(console_settings)) as url:
        yield url
