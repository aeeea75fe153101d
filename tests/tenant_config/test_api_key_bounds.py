"""A stored API key (a deployment's, the embedding's) is bounded at save: at most 4,096 visible ASCII
characters, no NUL, space or control character; refused with a message naming the field that never
repeats the key, and nothing is stored."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from switchboard.db.models import Tenant
from switchboard.llm.keys import API_KEY_MAX_CHARS, check_api_key

from services.orchestrator.main import create_app
from tests.utils.tenants import without_test_defaults


@pytest.fixture
async def api(settings):
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as client:
            yield client


BAD_KEYS = {
    "too long": ("k" * 700_000, "at most 4,096"),
    "NUL": ("sk-a\x00b", "only letters, digits and punctuation"),
    "space": ("sk-a b", "only letters, digits and punctuation"),
    "non-ASCII": ("sk-ключ", "only letters, digits and punctuation"),
}


@pytest.mark.parametrize("case", sorted(BAD_KEYS))
async def test_a_deployment_key_out_of_bounds_is_refused(api, make_tenant, sessions, case):
    key, words = BAD_KEYS[case]
    tenant = await make_tenant()
    deployment = {"id": "d0", "provider": "openai", "model": "gpt-4o-mini", "api_key": key}
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings", json={"llm": {"deployments": [deployment]}}
    )
    assert response.status_code == 422, response.text[:300]
    [problem] = response.json()["detail"]
    assert problem["path"] == "llm.deployments[0].api_key"
    assert words in problem["message"] and key not in problem["message"]
    async with sessions() as session:
        stored = without_test_defaults((await session.get(Tenant, tenant.id)).settings_extensions)
    assert "llm" not in stored


async def test_an_embedding_key_out_of_bounds_is_refused_on_both_save_paths(api, make_tenant, sessions):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}"
    long_key = "k" * (API_KEY_MAX_CHARS + 1)
    put = await api.put(f"{base}/knowledge/embedding", json={"api_key": long_key})
    assert put.status_code == 422 and "at most 4,096" in put.text
    patched = await api.patch(f"{base}/settings", json={"knowledge": {"embedding_api_key": "a\x00"}})
    assert patched.status_code == 422
    assert patched.json()["detail"][0]["path"] == "knowledge.embedding_api_key"
    async with sessions() as session:
        stored = without_test_defaults((await session.get(Tenant, tenant.id)).settings_extensions)
    assert "knowledge" not in stored


async def test_a_key_within_bounds_is_stored(api, make_tenant):
    tenant = await make_tenant()
    key = "sk-" + "A1_-." * 800  # 4,003 characters
    deployment = {"id": "d0", "provider": "openai", "model": "gpt-4o-mini", "api_key": key}
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings", json={"llm": {"deployments": [deployment]}}
    )
    assert response.status_code == 200, response.text[:300]


@given(st.text(max_size=60))
def test_check_api_key_takes_exactly_visible_ascii(text):
    key = text.strip()
    if key and all("!" <= ch <= "~" for ch in key):
        assert check_api_key(text) == key
    else:
        with pytest.raises(ValueError):
            check_api_key(text)
