"""Embedding keys never reach an address a tenant chose: a knowledge search through the admin API,
with the base URL set through the admin API, the settings document and the CLI."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr
from switchboard.db.models import Tenant
from switchboard.knowledge.embeddings import resolve_embedding_config
from switchboard.llm.lexical import LEXICAL_MODEL_NAME

from services.orchestrator.main import create_app
from tests.utils.key_listener import KeyListener, key_listener

PLATFORM_OPENAI = "sk-platform-openai-canary-e4b8"
TENANT_KEY = "sk-tenant-embedding-canary-e4b8"


@pytest.fixture
def canary_settings(settings):  # type: ignore[no-untyped-def]
    return settings.model_copy(
        update={"openai_api_key": SecretStr(PLATFORM_OPENAI), "tenants_may_use_platform_keys": True}
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
    assert not listener.carried(PLATFORM_OPENAI), listener.seen
    assert not listener.carried(TENANT_KEY), listener.seen


async def _search(api: httpx.AsyncClient, tenant: Tenant) -> httpx.Response:
    response = await api.get(f"/v1/admin/tenants/{tenant.slug}/knowledge/search", params={"q": "returns"})
    assert response.status_code == 200, response.text
    return response


async def test_a_search_never_sends_the_platform_key_to_a_tenant_embedding_base(
    api, make_tenant, listener, canary_settings
):
    tenant = await make_tenant(knowledge={"embedding_api_base": listener.url + "/v1"})
    await _search(api, tenant)
    _no_canary(listener)
    # no key may go there, so the offline embedding answers (nothing is sent at all)
    assert resolve_embedding_config(canary_settings, tenant).model == LEXICAL_MODEL_NAME
    assert listener.seen == []

    # the control: a key given for that base is sent there, so the search does reach the listener
    saved = await api.put(
        f"/v1/admin/tenants/{tenant.slug}/knowledge/embedding",
        json={
            "model": "text-embedding-3-small",
            "api_base": listener.url + "/v1",
            "api_key": "sk-for-listener",
        },
    )
    assert saved.status_code == 200 and saved.json()["has_api_key"] is True
    await _search(api, tenant)
    assert listener.credentials() and set(listener.credentials()) == {"Bearer sk-for-listener"}


async def test_a_new_embedding_base_in_the_settings_drops_the_stored_key(
    api, make_tenant, listener, sessions
):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    given = await api.patch(base, json={"knowledge": {"embedding_api_key": TENANT_KEY}})
    assert given.status_code == 200, given.text
    moved = await api.patch(
        base, json={"knowledge": {"embedding_api_base": listener.url + "/v1", "embedding_api_key": "set"}}
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["settings"]["sections"]["knowledge"]["embedding_api_key"] == "not set"
    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions["knowledge"]
    assert stored == {"embedding_api_base": listener.url + "/v1"}
    await _search(api, tenant)
    _no_canary(listener)


async def test_a_new_embedding_provider_in_the_settings_drops_the_stored_key(api, make_tenant, sessions):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    assert (await api.patch(base, json={"knowledge": {"embedding_api_key": TENANT_KEY}})).status_code == 200
    moved = await api.patch(base, json={"knowledge": {"embedding_model": "cohere/embed-english-v3.0"}})
    assert moved.status_code == 200, moved.text
    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions["knowledge"]
    assert "embedding_api_key_encrypted" not in stored


async def test_cli_set_embedding_with_a_new_base_sends_no_key_there(cli, api, make_tenant, listener):
    tenant = await make_tenant()
    given = await cli.arun("kb", "set-embedding", "--tenant", tenant.slug, "--api-key", TENANT_KEY)
    assert given.exit_code == 0, given.output
    moved = await cli.arun(
        "kb",
        "set-embedding",
        "--tenant",
        tenant.slug,
        "--api-base",
        listener.url + "/v1",
        OPENAI_API_KEY=PLATFORM_OPENAI,
        TENANTS_MAY_USE_PLATFORM_KEYS="true",
    )
    assert moved.exit_code == 0, moved.output
    assert f"embedding model in effect: {LEXICAL_MODEL_NAME} (key: none)" in moved.output
    await _search(api, tenant)
    _no_canary(listener)


async def test_cli_settings_set_of_a_new_embedding_base_drops_the_stored_key(
    cli, api, make_tenant, listener, sessions
):
    tenant = await make_tenant()
    given = await cli.arun(
        "tenant", "settings", "set", "-t", tenant.slug, f"knowledge.embedding_api_key={TENANT_KEY}"
    )
    assert given.exit_code == 0, given.output
    moved = await cli.arun(
        "tenant", "settings", "set", "-t", tenant.slug, f"knowledge.embedding_api_base={listener.url}/v1"
    )
    assert moved.exit_code == 0, moved.output
    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions["knowledge"]
    assert "embedding_api_key_encrypted" not in stored
    await _search(api, tenant)
    _no_canary(listener)


def test_the_platform_key_serves_only_the_default_model_unless_the_operator_allows_more(settings):
    """Resolution alone (no call): OpenAI's endpoint, the default model; another model needs the
    operator's consent or the tenant's own key."""
    from switchboard.db.models import Tenant as Row

    closed = settings.model_copy(update={"openai_api_key": SecretStr(PLATFORM_OPENAI)})
    opened = closed.model_copy(update={"tenants_may_use_platform_keys": True})
    default = Row(slug="t", name="t", settings_extensions={})
    other = Row(
        slug="t", name="t", settings_extensions={"knowledge": {"embedding_model": "text-embedding-3-large"}}
    )
    assert resolve_embedding_config(closed, default).api_key == PLATFORM_OPENAI
    assert resolve_embedding_config(closed, other).model == LEXICAL_MODEL_NAME
    assert resolve_embedding_config(opened, other).api_key == PLATFORM_OPENAI
    prefixed = Row(
        slug="t",
        name="t",
        settings_extensions={"knowledge": {"embedding_model": "openai/text-embedding-3-small"}},
    )
    assert (
        resolve_embedding_config(closed, prefixed).api_key == PLATFORM_OPENAI
    )  # the default, spelt with its provider


# --- a model named without a provider prefix goes where LiteLLM routes it ----------------------------

COHERE_BARE = "embed-english-v3.0"
"""LiteLLM sends this bare name to Cohere (its model table), not to OpenAI."""


def _cohere_to(listener: KeyListener, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cohere's own embedding endpoint (https://api.cohere.ai/v2/embed) moved to the listener."""
    from litellm.llms.cohere.embed.transformation import CohereEmbeddingConfig

    monkeypatch.setattr(
        CohereEmbeddingConfig, "get_complete_url", lambda self, *a, **k: listener.url + "/v2/embed"
    )


async def _embed(config) -> None:  # type: ignore[no-untyped-def]
    from switchboard.knowledge.embeddings import embed_texts

    try:
        await embed_texts(config, ["hello"])
    except Exception:  # noqa: BLE001 - the listener answers no embedding; only what it received matters
        pass


async def test_a_bare_cohere_model_never_gets_the_openai_platform_key(
    canary_settings, make_tenant, listener, monkeypatch
):
    tenant = await make_tenant(knowledge={"embedding_model": COHERE_BARE})
    config = resolve_embedding_config(canary_settings, tenant)
    assert config.api_key is None
    assert config.model == LEXICAL_MODEL_NAME
    _cohere_to(listener, monkeypatch)
    await _embed(resolve_embedding_config(canary_settings, tenant, model_override=COHERE_BARE))
    _no_canary(listener)


async def test_a_stored_key_is_dropped_when_the_model_is_renamed_to_a_bare_cohere_model(
    settings, make_tenant, sessions, listener, monkeypatch
):
    """The tenant's own key, given for an OpenAI model, is not kept by "set" for a model of another
    provider named without a prefix; no platform key is involved."""
    app = create_app(settings)
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    async with app.router.lifespan_context(app):
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as api:
            given = await api.patch(
                base,
                json={
                    "knowledge": {
                        "embedding_model": "text-embedding-3-small",
                        "embedding_api_key": TENANT_KEY,
                    }
                },
            )
            assert given.status_code == 200, given.text
            renamed = await api.patch(
                base, json={"knowledge": {"embedding_model": COHERE_BARE, "embedding_api_key": "set"}}
            )
            assert renamed.status_code == 200, renamed.text
    async with sessions() as session:
        stored = await session.get(Tenant, tenant.id)
    assert "embedding_api_key_encrypted" not in stored.settings_extensions["knowledge"]
    _cohere_to(listener, monkeypatch)
    await _embed(resolve_embedding_config(settings, stored, model_override=COHERE_BARE))
    assert not listener.carried(TENANT_KEY), listener.seen


async def test_a_reindex_with_a_bare_model_of_another_provider_takes_no_stored_key(
    api, make_tenant, sessions
):
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}"
    given = await api.patch(f"{base}/settings", json={"knowledge": {"embedding_api_key": TENANT_KEY}})
    assert given.status_code == 200, given.text
    refused = await api.post(f"{base}/knowledge/reindex", json={"embedding_model": COHERE_BARE})
    assert refused.status_code == 422, refused.text
    assert COHERE_BARE in refused.json()["detail"]
    async with sessions() as session:
        stored = (await session.get(Tenant, tenant.id)).settings_extensions["knowledge"]
    assert stored.get("embedding_model") is None and stored["embedding_api_key_encrypted"]


async def test_switching_to_a_bare_model_of_another_provider_drops_the_stored_key(settings, make_tenant):
    from switchboard.knowledge.embeddings import set_tenant_embedding, switch_embedding_model

    tenant = await make_tenant()
    set_tenant_embedding(settings, tenant, model="text-embedding-3-small", api_key=TENANT_KEY)
    switch_embedding_model(settings, tenant, "text-embedding-3-large")  # OpenAI as well: kept
    assert tenant.settings_extensions["knowledge"]["embedding_api_key_encrypted"]
    switch_embedding_model(settings, tenant, COHERE_BARE)
    assert tenant.settings_extensions["knowledge"].get("embedding_api_key_encrypted") is None
