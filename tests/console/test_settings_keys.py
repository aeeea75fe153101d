"""The agent settings form never carries a model key to an address typed into it: "Test this
deployment" (which tests the form as typed) and Save both drop a stored key whose address changed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Role, Tenant

from services.console.main import create_app
from tests.utils.console import log_in, new_user
from tests.utils.html_forms import form_values
from tests.utils.key_listener import KeyListener, key_listener

PLATFORM_OPENAI = "sk-platform-openai-canary-c0n5"
PLATFORM_ANTHROPIC = "sk-ant-platform-canary-c0n5"
TENANT_KEY = "sk-tenant-own-canary-c0n5"


@pytest.fixture
async def keyed_console(
    make_settings, settings, orchestrator_url
) -> AsyncIterator[Callable[[], httpx.AsyncClient]]:  # type: ignore[no-untyped-def]
    """The console of a platform that holds provider keys and lets tenants use them (the most open
    setting): they must still never reach an address a tenant typed."""
    console_settings = make_settings(
        orchestrator_port=settings.orchestrator_port,
        openai_api_key=PLATFORM_OPENAI,
        anthropic_api_key=PLATFORM_ANTHROPIC,
        tenants_may_use_platform_keys=True,
    )
    app = create_app(console_settings)
    async with app.router.lifespan_context(app):

        def make() -> httpx.AsyncClient:
            return httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app, client=("10.9.8.7", 40000)),
                base_url="http://console.test",
                headers={"Accept": "text/html"},
            )

        yield make


@pytest.fixture
async def listener() -> AsyncIterator[KeyListener]:
    async with key_listener() as recording:
        yield recording


def _no_canary(listener: KeyListener) -> None:
    for secret in (PLATFORM_OPENAI, PLATFORM_ANTHROPIC, TENANT_KEY):
        assert not listener.carried(secret), listener.seen


async def _keyed_tenant(make_tenant, settings) -> Tenant:  # type: ignore[no-untyped-def]
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    token = cipher.encrypt({"api_key": TENANT_KEY})
    return await make_tenant(
        llm={"deployments": [{"id": "main", "model": "gpt-4o-mini", "api_key_encrypted": token}]}
    )


async def _form(client: httpx.AsyncClient, tenant: Tenant, *, with_deployment: bool = True) -> dict[str, Any]:
    page = await client.get(f"/t/{tenant.slug}/settings")
    assert page.status_code == 200
    if with_deployment:
        assert 'hx-post="/t/' + tenant.slug + '/settings/deployments/main/test"' in page.text
    return form_values(page.text, f"/t/{tenant.slug}/settings")


async def test_the_test_button_tests_the_typed_address_without_the_stored_key(
    keyed_console, make_tenant, sessions, settings, listener
):
    tenant = await _keyed_tenant(make_tenant, settings)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with keyed_console() as client:
        me = await log_in(client, admin)
        values = await _form(client, tenant)
        assert values["llm.deployments.0.api_key"] == ""  # write-only: the stored key stays on the server
        values["llm.deployments.0.api_base"] = listener.url + "/v1"  # typed, not saved
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/main/test", values)
        assert tested.status_code == 200, tested.text
        assert "probe-failed" in tested.text and "official endpoint" in tested.text
        _no_canary(listener)

        # a key typed for the new address is the one that goes there
        values["llm.deployments.0.api_key"] = "sk-typed-for-the-listener"
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/main/test", values)
        assert "probe-ok" in tested.text, tested.text
        assert listener.credentials() == ["Bearer sk-typed-for-the-listener"]
        _no_canary(listener)
    async with sessions() as session:  # testing stored nothing
        row = await session.get(Tenant, tenant.id)
        assert "api_base" not in row.settings_extensions["llm"]["deployments"][0]


async def test_saving_a_new_address_drops_the_stored_key(
    keyed_console, make_tenant, sessions, settings, listener
):
    tenant = await _keyed_tenant(make_tenant, settings)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with keyed_console() as client:
        me = await log_in(client, admin)
        values = await _form(client, tenant)
        values["llm.deployments.0.api_base"] = listener.url + "/v1"
        refused = await me.post_form(f"/t/{tenant.slug}/settings", values)  # tested first: no key goes
        assert refused.status_code == 422 and "probe-failed" in refused.text
        values["save_anyway"] = "1"
        saved = await me.post_form(f"/t/{tenant.slug}/settings", values)
        assert saved.status_code == 200, saved.text[:2000]
        async with sessions() as session:
            stored = (await session.get(Tenant, tenant.id)).settings_extensions["llm"]["deployments"][0]
        assert stored["api_base"] == listener.url + "/v1" and "api_key_encrypted" not in stored
        # the stored deployment, tested as saved
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/main/test")
        assert "probe-failed" in tested.text
        _no_canary(listener)


async def test_a_new_row_at_a_typed_address_gets_no_platform_key(
    keyed_console, make_tenant, sessions, listener
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with keyed_console() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {
                "llm.deployments.0.id": "mine",
                "llm.deployments.0.model": "claude-haiku-4-5",
                "llm.deployments.0.provider": "anthropic",
                "llm.deployments.0.api_base": listener.url,
            }
        )
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/mine/test", values)
        assert tested.status_code == 200 and "probe-failed" in tested.text
        values["llm.deployments.0.provider"] = "openai"
        values["llm.deployments.0.api_base"] = listener.url + "/v1"
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/mine/test", values)
        assert tested.status_code == 200 and "probe-failed" in tested.text
        _no_canary(listener)


async def test_the_platform_page_shows_the_keys_and_who_may_use_them_never_a_key(
    keyed_console, console_client, sessions
):
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    async with keyed_console() as client:
        await log_in(client, platform)
        page = await client.get("/platform")
    assert page.status_code == 200
    assert 'data-key="openai">set<' in page.text and 'data-key="anthropic">set<' in page.text
    assert 'data-setting="tenants-may-use-platform-keys">yes<' in page.text
    assert PLATFORM_OPENAI not in page.text and PLATFORM_ANTHROPIC not in page.text
    async with console_client() as client:  # the default: tenants' own models may not use them
        await log_in(client, platform)
        page = await client.get("/platform")
    assert 'data-setting="tenants-may-use-platform-keys">no<' in page.text
    assert "official endpoint" in page.text


async def test_the_form_drops_the_embedding_key_when_its_base_changes_and_a_search_sends_none(
    keyed_console, make_tenant, sessions, settings, listener
):
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    tenant = await make_tenant(
        knowledge={"embedding_api_key_encrypted": cipher.encrypt({"api_key": TENANT_KEY})}
    )
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with keyed_console() as client:
        me = await log_in(client, admin)
        values = await _form(client, tenant, with_deployment=False)
        values["knowledge.embedding_api_base"] = listener.url + "/v1"
        saved = await me.post_form(f"/t/{tenant.slug}/settings", values)
        assert saved.status_code == 200, saved.text[:2000]
        async with sessions() as session:
            stored = (await session.get(Tenant, tenant.id)).settings_extensions["knowledge"]
        assert stored == {"embedding_api_base": listener.url + "/v1"}
        tried = await client.get(f"/t/{tenant.slug}/knowledge/try", params={"q": "returns"})
        assert tried.status_code == 200
        _no_canary(listener)
