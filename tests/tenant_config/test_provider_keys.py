"""Model keys never reach an address a tenant chose: "Test this deployment" through the admin API, and
every save path (API, CLI set, CLI edit) dropping a stored key when a deployment's address changes."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator

import httpx
import pytest
import yaml
from pydantic import SecretStr
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Tenant

from services.orchestrator.main import create_app
from tests.utils.key_listener import KeyListener, key_listener

PLATFORM_OPENAI = "sk-platform-openai-canary-7f3a"
PLATFORM_ANTHROPIC = "sk-ant-platform-canary-7f3a"
TENANT_KEY = "sk-tenant-own-canary-91c2"


@pytest.fixture
def canary_settings(settings):  # type: ignore[no-untyped-def]
    """The platform holds both provider keys and lets tenants spend its credit (the most open setting):
    the keys must still never reach a tenant-chosen address."""
    return settings.model_copy(
        update={
            "openai_api_key": SecretStr(PLATFORM_OPENAI),
            "anthropic_api_key": SecretStr(PLATFORM_ANTHROPIC),
            "tenants_may_use_platform_keys": True,
        }
    )


@pytest.fixture
async def api(canary_settings) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    app = create_app(canary_settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {canary_settings.secret('admin_token')}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            yield client


@pytest.fixture
async def listener() -> AsyncIterator[KeyListener]:
    async with key_listener() as recording:
        yield recording


def _no_canary(listener: KeyListener) -> None:
    for secret in (PLATFORM_OPENAI, PLATFORM_ANTHROPIC, TENANT_KEY):
        assert not listener.carried(secret), listener.seen


async def _stored_deployment(sessions, tenant_id) -> dict:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (await session.get(Tenant, tenant_id)).settings_extensions["llm"]["deployments"][0]


@pytest.mark.parametrize(
    ("provider", "base_path"), [("openai", "/v1"), ("anthropic", ""), ("openai_compatible", "/v1")]
)
async def test_testing_a_deployment_at_a_tenant_address_never_sends_the_platform_key(
    api, make_tenant, listener, provider, base_path
):
    tenant = await make_tenant(
        llm={
            "deployments": [
                {
                    "id": "main",
                    "provider": provider,
                    "model": "gpt-4o-mini",
                    "api_base": listener.url + base_path,
                }
            ]
        }
    )
    response = await api.post(f"/v1/admin/tenants/{tenant.slug}/settings/deployments/main/test")
    assert response.status_code == 200, response.text
    _no_canary(listener)
    if provider != "openai_compatible":  # a provider that needs a key says why it has none
        assert response.json()["ok"] is False
        assert "official endpoint" in response.json()["error"]
        assert PLATFORM_OPENAI not in response.text and PLATFORM_ANTHROPIC not in response.text


async def test_changing_api_base_drops_the_stored_key_and_only_a_new_key_goes_there(
    api, make_tenant, listener, sessions, settings
):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    first = {"id": "main", "provider": "openai", "model": "gpt-4o-mini", "api_key": TENANT_KEY}
    assert (await api.patch(base, json={"llm": {"deployments": [first]}})).status_code == 200
    assert "api_key_encrypted" in await _stored_deployment(sessions, tenant.id)

    # the attacker's move: point it elsewhere and send the "keep the stored key" placeholder
    moved = {**first, "api_base": listener.url + "/v1", "api_key": "set"}
    saved = await api.patch(base, json={"llm": {"deployments": [moved]}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["settings"]["sections"]["llm"]["deployments"][0]["api_key"] == "not set"
    assert "api_key_encrypted" not in await _stored_deployment(sessions, tenant.id)
    probe = await api.post(f"{base}/deployments/main/test")
    assert probe.status_code == 200 and probe.json()["ok"] is False
    _no_canary(listener)

    # a key given in the same request is the one that goes there (the listener records it)
    fresh = {**moved, "api_key": "sk-given-for-the-listener"}
    assert (await api.patch(base, json={"llm": {"deployments": [fresh]}})).status_code == 200
    probe = await api.post(f"{base}/deployments/main/test")
    assert probe.json()["ok"] is True, probe.json()
    assert listener.credentials() == ["Bearer sk-given-for-the-listener"]
    _no_canary(listener)


async def test_changing_the_provider_drops_the_stored_key(api, make_tenant, listener, sessions):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    first = {"id": "main", "provider": "anthropic", "model": "claude-haiku-4-5", "api_key": TENANT_KEY}
    assert (await api.patch(base, json={"llm": {"deployments": [first]}})).status_code == 200
    # same model field, another provider whose address is the tenant's
    moved = {
        "id": "main",
        "provider": "openai_compatible",
        "model": "m",
        "api_base": listener.url + "/v1",
        "api_key": "set",
    }
    assert (await api.put(base, json={"llm": {"deployments": [moved]}})).status_code == 200
    assert "api_key_encrypted" not in await _stored_deployment(sessions, tenant.id)
    assert (await api.post(f"{base}/deployments/main/test")).json()["ok"] is True  # keyless server
    assert listener.credentials() == ["Bearer not-needed"]
    _no_canary(listener)


async def test_an_unchanged_address_keeps_the_stored_key(api, make_tenant, listener, sessions, settings):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    first = {
        "id": "main",
        "provider": "openai_compatible",
        "model": "m",
        "api_base": listener.url + "/v1",
        "api_key": TENANT_KEY,
    }
    assert (await api.patch(base, json={"llm": {"deployments": [first]}})).status_code == 200
    # another spelling of the same address (trailing slash, upper-case scheme) and a new model
    same = {
        **first,
        "api_base": listener.url.replace("http", "HTTP") + "/v1/",
        "model": "m2",
        "api_key": "set",
    }
    assert (await api.patch(base, json={"llm": {"deployments": [same]}})).status_code == 200
    token = (await _stored_deployment(sessions, tenant.id))["api_key_encrypted"]
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    assert cipher.decrypt(token) == {"api_key": TENANT_KEY}
    assert (await api.post(f"{base}/deployments/main/test")).json()["ok"] is True
    assert listener.credentials() == [f"Bearer {TENANT_KEY}"]  # its own address: its own key


async def test_cli_set_of_a_new_api_base_drops_the_stored_key(cli, make_tenant, listener, sessions, api):
    tenant = await make_tenant()
    given = await cli.arun(
        "tenant",
        "settings",
        "set",
        "-t",
        tenant.slug,
        f'llm.deployments=[{{"id": "main", "provider": "openai", "model": "gpt-4o-mini", "api_key": "{TENANT_KEY}"}}]',
    )
    assert given.exit_code == 0, given.output
    moved = await cli.arun(
        "tenant", "settings", "set", "-t", tenant.slug, f"llm.deployments[main].api_base={listener.url}/v1"
    )
    assert moved.exit_code == 0, moved.output
    assert "api_key_encrypted" not in await _stored_deployment(sessions, tenant.id)
    shown = await cli.arun("tenant", "settings", "show", "-t", tenant.slug, "--section", "llm")
    assert yaml.safe_load(shown.output)["llm"]["deployments"][0]["api_key"] == "not set"
    await api.post(f"/v1/admin/tenants/{tenant.slug}/settings/deployments/main/test")
    _no_canary(listener)


async def test_cli_edit_of_a_new_api_base_drops_the_stored_key(
    cli, make_tenant, listener, sessions, api, tmp_path
):
    tenant = await make_tenant()
    given = await cli.arun(
        "tenant",
        "settings",
        "set",
        "-t",
        tenant.slug,
        f'llm.deployments=[{{"id": "main", "provider": "openai", "model": "gpt-4o-mini", "api_key": "{TENANT_KEY}"}}]',
    )
    assert given.exit_code == 0, given.output
    script = tmp_path / "editor.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, yaml
            path = sys.argv[1]
            document = yaml.safe_load(open(path))
            document["llm"]["deployments"][0]["api_base"] = "{listener.url}/v1"
            assert document["llm"]["deployments"][0]["api_key"] == "set"
            yaml.safe_dump(document, open(path, "w"))
            """
        )
    )
    edited = await cli.arun(
        "tenant", "settings", "edit", "-t", tenant.slug, EDITOR=f"{sys.executable} {script}", VISUAL=None
    )
    assert edited.exit_code == 0, edited.output
    deployment = await _stored_deployment(sessions, tenant.id)
    assert deployment["api_base"] == f"{listener.url}/v1" and "api_key_encrypted" not in deployment
    await api.post(f"/v1/admin/tenants/{tenant.slug}/settings/deployments/main/test")
    _no_canary(listener)


@pytest.mark.parametrize(
    ("kind", "path"), [("transcription", "/v1/audio/transcriptions"), ("vision", "/v1/chat/completions")]
)
async def test_a_voice_or_picture_model_moved_to_another_address_loses_its_key_and_never_gets_the_platforms(
    api, make_tenant, listener, sessions, kind, path
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    model = "whisper-1" if kind == "transcription" else "gpt-4o-mini"
    first = {"id": "media", "provider": "openai", "model": model, "api_key": TENANT_KEY}
    assert (await api.patch(base, json={"llm": {kind: [first]}})).status_code == 200
    # pointed at another address with the "keep the stored key" placeholder: the key stays behind
    moved = {**first, "api_base": listener.url + "/v1", "api_key": "set"}
    saved = await api.patch(base, json={"llm": {kind: [moved]}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["settings"]["sections"]["llm"][kind][0]["api_key"] == "not set"
    probe = await api.post(f"{base}/media/{kind}/media/test")
    assert probe.status_code == 200 and probe.json()["ok"] is False  # no key: said, not sent
    assert listener.seen == []

    fresh = {**moved, "api_key": "sk-given-for-the-listener"}
    assert (await api.patch(base, json={"llm": {kind: [fresh]}})).status_code == 200
    probe = await api.post(f"{base}/media/{kind}/media/test")
    assert probe.json()["ok"] is True, probe.json()
    assert [(s.path, s.credentials) for s in listener.seen] == [
        (path, {"authorization": "Bearer sk-given-for-the-listener"})
    ]
    _no_canary(listener)
    assert (await api.post(f"{base}/media/{kind}/nobody/test")).status_code == 404
    assert (await api.post(f"{base}/media/video/media/test")).status_code == 404
