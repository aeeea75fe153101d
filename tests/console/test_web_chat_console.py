"""The website chat in the console: the Channels page makes a widget and gives its snippet and secret, saves
its websites and look, rotates the secret; a visitor's words are shown as text, never as HTML."""

from __future__ import annotations

import secrets

import httpx
from sqlmodel import select
from switchboard.channels.web.widgets import verified_user, widget_secret_of
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Conversation, Role, Tenant

from tests.utils.agent import answer_with_script
from tests.utils.console import log_in, new_user
from tests.utils.servers import serve_app
from tests.utils.web import ORIGIN, connect_web, new_visitor
from tests.utils.workers import run_worker_burst


async def _widget(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (
            await session.exec(
                select(ChannelAccount).where(
                    ChannelAccount.tenant_id == tenant_id, ChannelAccount.channel == "web"
                )
            )
        ).one()


async def test_an_admin_makes_a_widget_sets_its_websites_and_rotates_its_secret(
    console_client, sessions, make_tenant, settings
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    cipher = CredentialCipher.from_settings(settings)
    async with console_client() as client:
        console = await log_in(client, admin)
        empty = await client.get(f"/t/{tenant.slug}/channels")
        created = await console.post_form(f"/t/{tenant.slug}/channels/web/create")
        widget = await _widget(sessions, tenant.id)
        key, first_secret = widget.external_account_id, widget_secret_of(widget, cipher)
        refused = await console.post_form(
            f"/t/{tenant.slug}/channels/web/settings",
            {"allowed_origins": "https://shop.example.com/path", "colour": "#123456"},
        )
        saved = await console.post_form(
            f"/t/{tenant.slug}/channels/web/settings",
            {
                "allowed_origins": "HTTPS://Shop.Example.com:443/\nhttp://localhost:8000",
                "colour": "#aa3300",
                "greeting_es": "¡Bienvenido!",
                "title": "Tienda",
            },
        )
        rotated = await console.post_form(f"/t/{tenant.slug}/channels/web/{key}/rotate")
        later = await client.get(f"/t/{tenant.slug}/channels")
    assert "/channels/web/create" in empty.text
    assert created.status_code == 200
    assert f'data-key="{key}"' in created.text.replace("&#34;", '"').replace("&quot;", '"')
    assert first_secret and first_secret in created.text
    assert refused.status_code == 422 and "scheme, host and port" in refused.text
    assert saved.status_code == 200
    async with sessions() as session:
        row = await session.get(Tenant, tenant.id)
        assert row is not None
        web = row.settings_extensions["web"]
    assert web["allowed_origins"] == ["https://shop.example.com", "http://localhost:8000"]
    assert (web["colour"], web["greeting_es"], web["title"]) == ("#aa3300", "¡Bienvenido!", "Tienda")
    new_secret = widget_secret_of(await _widget(sessions, tenant.id), cipher)
    assert new_secret and new_secret != first_secret and new_secret in rotated.text
    assert first_secret not in later.text and new_secret not in later.text  # a secret is shown once
    from switchboard.channels.web.widgets import user_hash

    assert verified_user(new_secret, "7", user_hash(first_secret, "7")) is None


async def test_a_visitors_html_is_shown_as_text_in_the_console(
    console_client, sessions, make_tenant, make_settings, settings, orchestrator_url, offline_model
) -> None:  # type: ignore[no-untyped-def]
    from services.web.main import create_app

    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model)
    settings = make_settings(orchestrator_port=settings.orchestrator_port)
    account, _ = await connect_web(sessions, tenant, settings)
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    async with serve_app(create_app(settings)) as url, httpx.AsyncClient() as http:
        response = await http.post(
            url + "/web/v1/messages",
            headers={"Origin": ORIGIN},
            json={
                "key": account.external_account_id,
                "visitor": new_visitor(),
                "name": "<b>x</b>",
                "messages": [{"id": secrets.token_urlsafe(16), "text": hostile}],
            },
        )
    assert response.status_code == 200
    await run_worker_burst(settings)
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == tenant.id))
        ).one()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/conversations/{conversation.id}")
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
    assert page.status_code == 200
    assert "&lt;img src=x onerror=" in page.text and "&lt;script&gt;alert(2)" in page.text
    assert "<img src=x" not in page.text and "<script>alert(2)" not in page.text
    assert "<script>alert(2)" not in inbox.text
