"""Admin API ``/v1/admin/tenants/{slug}/settings``: read, replace, patch, history; secrets never shown."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Tenant

from services.orchestrator.main import create_app
from tests.utils.tenants import without_test_defaults


@pytest.fixture
async def api(settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            yield client


async def _stored(sessions, tenant_id) -> dict:
    async with sessions() as session:
        return without_test_defaults((await session.get(Tenant, tenant_id)).settings_extensions)


async def test_patch_stores_an_encrypted_key_returns_it_redacted_and_is_audited(
    api, make_tenant, sessions, settings
):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    body = {
        "agent": {"name": "Sam"},
        "llm": {
            "deployments": [
                {"id": "main", "provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-live-9"}
            ]
        },
    }
    response = await api.patch(base, json=body)
    assert response.status_code == 200, response.text
    saved = response.json()
    assert saved["change"]["actor"] == "api:admin-token" and saved["change"]["source"] == "api"
    assert saved["change"]["changed_paths"] == ["agent.name", "llm.deployments"]
    assert saved["settings"]["sections"]["llm"]["deployments"][0]["api_key"] == "set"
    assert "sk-live-9" not in response.text and "gAAAA" not in response.text
    token = (await _stored(sessions, tenant.id))["llm"]["deployments"][0]["api_key_encrypted"]
    assert CredentialCipher(settings.secret("encryption_key").encode()).decrypt(token) == {
        "api_key": "sk-live-9"
    }

    # "set" keeps the key; a second patch changing only the model keeps the token
    again = await api.patch(
        base,
        json={
            "llm": {
                "deployments": [{"id": "main", "provider": "openai", "model": "gpt-4o", "api_key": "set"}]
            }
        },
    )
    assert again.status_code == 200, again.text
    assert (await _stored(sessions, tenant.id))["llm"]["deployments"][0]["api_key_encrypted"] == token

    history = (await api.get(f"{base}/history")).json()
    assert [h["changed_paths"] for h in history] == [["llm.deployments"], ["agent.name", "llm.deployments"]]
    assert history[0]["before"]["llm"]["deployments"][0]["model"] == "gpt-4o-mini"
    # stored as little as it takes: provider "openai" is the default
    assert history[0]["after"]["llm"]["deployments"][0] == {"id": "main", "model": "gpt-4o", "api_key": "set"}
    assert "sk-live" not in str(history) and "gAAAA" not in str(history)


async def test_invalid_settings_are_refused_with_every_path_and_nothing_changes(api, make_tenant, sessions):
    tenant = await make_tenant(agent={"name": "Kept"})
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings",
        json={
            "loop": {"max_tool_iterations": 99},
            "agent": {"api_key_encrypted": "gAAAA-forged"},
            "nope": {},
        },
    )
    assert response.status_code == 422
    paths = {p["path"] for p in response.json()["detail"]}
    assert paths == {"loop.max_tool_iterations", "agent.api_key_encrypted", "nope"}
    assert await _stored(sessions, tenant.id) == {"agent": {"name": "Kept"}}
    assert (await api.get(f"/v1/admin/tenants/{tenant.slug}/settings/history")).json() == []


async def test_zero_tool_iterations_is_refused_with_a_clear_error(api, make_tenant, sessions):
    """``loop.max_tool_iterations=0`` would make every turn skip its tools: refused, nothing stored."""
    tenant = await make_tenant()
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings", json={"loop": {"max_tool_iterations": 0}}
    )
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["path"] == "loop.max_tool_iterations"
    assert "greater than or equal to 1" in problem["message"]
    assert await _stored(sessions, tenant.id) == {}
    accepted = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings", json={"loop": {"max_tool_iterations": 1}}
    )
    assert accepted.status_code == 200, accepted.text
    assert (await _stored(sessions, tenant.id))["loop"] == {"max_tool_iterations": 1}


async def test_a_forged_token_is_refused_where_a_secret_lives(api, make_tenant):
    tenant = await make_tenant()
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings",
        json={"knowledge": {"embedding_api_key_encrypted": "gAAAA-forged"}},
    )
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "path": "knowledge.embedding_api_key_encrypted",
            "message": "write 'embedding_api_key' (the key itself, encrypted on the way in), not a token",
        }
    ]


async def test_put_replaces_the_document_and_get_shows_defaults_in_the_tenants_language(
    api, make_tenant, sessions
):
    tenant = await make_tenant(agent={"name": "Old"}, memory={"max_chars": 500})
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    response = await api.put(base, json={"locale": {"language": "es"}, "loop": {"turn_timeout_s": 60}})
    assert response.status_code == 200, response.text
    assert await _stored(sessions, tenant.id) == {
        "locale": {"language": "es"},
        "loop": {"turn_timeout_s": 60.0},
    }
    view = (await api.get(base)).json()
    assert view["language"] == "es" and view["view"] == "effective"
    assert view["sections"]["agent"]["name"] == "Assistant"
    assert view["sections"]["handoff"]["queue_reply"].startswith("Todo nuestro equipo")
    assert without_test_defaults((await api.get(base, params={"view": "overrides"})).json()["sections"]) == {
        "locale": {"language": "es"},
        "loop": {"turn_timeout_s": 60.0},
    }
    # the same document again changes nothing and writes no audit row
    same = await api.put(base, json={"locale": {"language": "es"}, "loop": {"turn_timeout_s": 60}})
    assert same.json()["change"] is None
    assert len((await api.get(f"{base}/history")).json()) == 1


async def test_settings_routes_need_the_admin_token_and_a_known_tenant(api, make_tenant):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    for method in ("GET", "PUT", "PATCH"):
        response = await api.request(method, base, json={}, headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401, method
    assert (await api.get("/v1/admin/tenants/no-such-shop/settings")).status_code == 404
    schema = (await api.get(f"{base}/schema")).json()
    assert schema["agent"]["properties"]["name"]["default"] == "Assistant"
    assert "deployments" in schema["llm"]["properties"]


async def test_openapi_documents_the_settings_bodies_and_responses(api):
    spec = (await api.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/admin/tenants/{slug}/settings"]["patch"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "SettingsDocument"
    )
    assert "422" in operation["responses"] and "404" in operation["responses"]
    assert spec["components"]["schemas"]["SettingsSaved"]["properties"]["change"]
