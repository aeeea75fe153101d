"""Agent settings in words: which model answers now and in what order, a Test button on every
deployment row (new ones included), and a save that tests every new or changed deployment first."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Role, Tenant
from switchboard.llm.config import DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL, OFFLINE_DEMO_MODEL

from services.console.main import create_app
from tests.utils.console import log_in, new_user
from tests.utils.html_forms import form_values
from tests.utils.key_listener import KeyListener, key_listener
from tests.utils.servers import serve_app
from tests.utils.tenants import without_test_defaults


@pytest.fixture
async def listener() -> AsyncIterator[KeyListener]:
    async with key_listener() as recording:
        yield recording


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _stored(sessions, tenant_id) -> dict:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return without_test_defaults((await session.get(Tenant, tenant_id)).settings_extensions)


async def _admin_page(client, sessions, tenant):  # type: ignore[no-untyped-def]
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    me = await log_in(client, admin)
    page = await client.get(f"/t/{tenant.slug}/settings")
    assert page.status_code == 200
    return me, page


def _answering_line(html: str) -> str:
    start = html.index('id="answering-now"')
    return html[start : html.index("</p>", start)]


async def test_without_deployments_the_platform_default_answers_and_says_so(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    async with console_client() as client:
        _, page = await _admin_page(client, sessions, tenant)
    line = _answering_line(page.text)
    assert f"Answering now: {OFFLINE_DEMO_MODEL} via offline-demo" in line
    assert "the platform's default answers" in line


async def test_with_a_platform_key_the_default_names_its_model_and_the_fallback(
    make_settings, settings, make_tenant, sessions
):
    console_settings = make_settings(openai_api_key="sk-platform", anthropic_api_key="sk-ant-platform")
    app = create_app(console_settings)
    tenant = await make_tenant()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("10.9.8.7", 40000))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://console.test", headers={"Accept": "text/html"}
        ) as client:
            _, page = await _admin_page(client, sessions, tenant)
    line = _answering_line(page.text)
    assert f"Answering now: {DEFAULT_OPENAI_MODEL} via openai-default" in line
    assert (
        f"1. {DEFAULT_OPENAI_MODEL} (openai-default), 2. {DEFAULT_ANTHROPIC_MODEL} (anthropic-default)"
        in line
    )


async def test_the_tenants_deployments_answer_in_priority_order(console_client, sessions, make_tenant):
    tenant = await make_tenant(
        llm={
            "deployments": [
                {"id": "backup", "model": "small-model", "priority": 2},
                {"id": "main", "model": "big-model", "priority": 1},
            ]
        }
    )
    async with console_client() as client:
        _, page = await _admin_page(client, sessions, tenant)
    line = _answering_line(page.text)
    assert "Answering now: big-model via main" in line
    assert "1. big-model (main), 2. small-model (backup)" in line
    assert "default answers" not in line


async def test_a_new_row_has_a_test_button_that_tests_it_as_typed(
    console_client, sessions, make_tenant, listener
):
    tenant = await make_tenant()
    async with console_client() as client:
        me, page = await _admin_page(client, sessions, tenant)
        button = f'hx-post="/t/{tenant.slug}/settings/deployments/row/0/test"'
        assert button in page.text
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        untitled = await me.post_form(f"/t/{tenant.slug}/settings/deployments/row/0/test", values)
        assert "probe-failed" in untitled.text and "Give the deployment an id" in untitled.text
        values.update(
            {
                "llm.deployments.0.id": "fresh",
                "llm.deployments.0.model": "typed-model",
                "llm.deployments.0.api_base": listener.url + "/v1",
                "llm.deployments.0.api_key": "sk-typed",
            }
        )
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/row/0/test", values)
    assert tested.status_code == 200 and "probe-ok" in tested.text, tested.text
    assert "Listener answer." in tested.text
    assert listener.credentials() == ["Bearer sk-typed"]
    assert await _stored(sessions, tenant.id) == {}  # a test saves nothing


async def test_a_failing_new_deployment_is_refused_with_its_url_then_saved_anyway(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    async with console_client() as client:
        me, page = await _admin_page(client, sessions, tenant)
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {
                "llm.deployments.0.id": "dead",
                "llm.deployments.0.model": "gone",
                "llm.deployments.0.api_base": dead,
                "llm.deployments.0.api_key": "sk-dead",
                "agent.name": "Typed",
            }
        )
        refused = await me.post_form(f"/t/{tenant.slug}/settings", values)
        assert refused.status_code == 422
        assert "Nothing was saved: a deployment did not answer its test." in refused.text
        assert f"Could not get an answer from {dead}: could not connect: connection refused" in refused.text
        assert 'id="save-anyway"' in refused.text and 'value="Typed"' in refused.text
        assert await _stored(sessions, tenant.id) == {}

        values["save_anyway"] = "1"
        saved = await me.post_form(f"/t/{tenant.slug}/settings", values)
    assert saved.status_code == 200, saved.text[:2000]
    stored = await _stored(sessions, tenant.id)
    assert stored["agent"] == {"name": "Typed"}
    assert [(d["id"], d["api_base"]) for d in stored["llm"]["deployments"]] == [("dead", dead)]


async def test_an_unchanged_deployment_is_not_tested_again_and_a_changed_one_is(
    console_client, sessions, make_tenant, settings, listener
):
    token = CredentialCipher(settings.secret("encryption_key").encode()).encrypt({"api_key": "sk-own"})
    tenant = await make_tenant(
        llm={
            "deployments": [
                {"id": "main", "model": "m1", "api_base": listener.url + "/v1", "api_key_encrypted": token},
            ]
        }
    )
    async with console_client() as client:
        me, page = await _admin_page(client, sessions, tenant)
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values["agent.name"] = "Renamed"
        saved = await me.post_form(f"/t/{tenant.slug}/settings", values)
        assert saved.status_code == 200, saved.text[:2000]
        assert listener.seen == []  # the deployment did not change: no test call

        values["llm.deployments.0.model"] = "m2"
        saved = await me.post_form(f"/t/{tenant.slug}/settings", values)
        assert saved.status_code == 200, saved.text[:2000]
    assert [s.path for s in listener.seen] == ["/v1/chat/completions"]
    assert listener.credentials() == ["Bearer sk-own"]
    stored = await _stored(sessions, tenant.id)
    assert stored["agent"] == {"name": "Renamed"} and stored["llm"]["deployments"][0]["model"] == "m2"


async def test_the_model_lines_are_in_the_tenants_language(console_client, sessions, make_tenant):
    tenant = await make_tenant(locale={"language": "es"})
    async with console_client() as client:
        _, page = await _admin_page(client, sessions, tenant)
    line = _answering_line(page.text)
    assert f"Responde ahora: {OFFLINE_DEMO_MODEL} mediante offline-demo" in line
    assert "Orden de respaldo:" in line and "No tiene modelos propios" in line


def _rejecting_provider() -> FastAPI:
    """An OpenAI-shaped provider that rejects every key (401, OpenAI's error body)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions() -> JSONResponse:
        error = {
            "message": "Incorrect API key provided.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
        return JSONResponse({"error": error}, status_code=401)

    return app


async def test_a_rejected_key_is_said_in_words(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    async with serve_app(_rejecting_provider()) as url, console_client() as client:
        me, page = await _admin_page(client, sessions, tenant)
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {
                "llm.deployments.0.id": "main",
                "llm.deployments.0.model": "m",
                "llm.deployments.0.api_base": url + "/v1",
                "llm.deployments.0.api_key": "sk-wrong",
            }
        )
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/row/0/test", values)
    assert f"Could not get an answer from {url}/v1: the key was rejected (401)" in tested.text, tested.text


async def test_a_refused_connection_is_said_in_the_tenants_language(console_client, sessions, make_tenant):
    tenant = await make_tenant(locale={"language": "es"})
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    async with console_client() as client:
        me, page = await _admin_page(client, sessions, tenant)
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {
                "llm.deployments.0.id": "dead",
                "llm.deployments.0.model": "gone",
                "llm.deployments.0.api_base": dead,
                "llm.deployments.0.api_key": "sk-dead",
            }
        )
        tested = await me.post_form(f"/t/{tenant.slug}/settings/deployments/row/0/test", values)
    assert f"No se obtuvo respuesta de {dead}: no se pudo conectar: conexión rechazada" in tested.text


async def test_a_failing_new_voice_message_model_is_refused_then_saved_anyway(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    async with console_client() as client:
        me, page = await _admin_page(client, sessions, tenant)
        assert 'id="llm.transcription"' in page.text and 'id="llm.vision"' in page.text
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {
                "llm.transcription.0.id": "dead-whisper",
                "llm.transcription.0.provider": "openai_compatible",
                "llm.transcription.0.model": "whisper-1",
                "llm.transcription.0.api_base": dead,
            }
        )
        refused = await me.post_form(f"/t/{tenant.slug}/settings", values)
        assert refused.status_code == 422
        assert f"Could not get an answer from {dead}: could not connect: connection refused" in refused.text
        assert await _stored(sessions, tenant.id) == {}

        values["save_anyway"] = "1"
        saved = await me.post_form(f"/t/{tenant.slug}/settings", values)
    assert saved.status_code == 200, saved.text[:2000]
    stored = await _stored(sessions, tenant.id)
    assert [(d["id"], d["api_base"]) for d in stored["llm"]["transcription"]] == [("dead-whisper", dead)]
