"""The Channels page: account health, connecting WhatsApp and Instagram with Meta's checks (the session's
Graph sandboxes stand in for Meta: an account on the "real" API talks to them), rotating a token,
disconnecting, and Gmail's OAuth consent through the Google sandbox."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import pytest
from sqlmodel import select
from switchboard.channels.accounts import access_token_of
from switchboard.channels.handshakes import account_verify_token
from switchboard.conversations import start_conversation, to_console_user
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Conversation, Customer, GmailMailbox, Outbox, Role

from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user
from tests.utils.gmail import SECRETS, new_mailbox
from tests.utils.servers import serve_app
from tests.utils.whatsapp import VERIFY_TOKEN, connect_whatsapp, new_phone_number_id


def _token() -> str:
    return f"EAAG-{uuid.uuid4().hex}"


async def _accounts(sessions, tenant_id) -> dict[str, ChannelAccount]:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = (await session.exec(select(ChannelAccount).where(ChannelAccount.tenant_id == tenant_id))).all()
    return {a.channel: a for a in rows}


async def test_channels_page_shows_each_accounts_health(console_client, sessions, make_tenant, settings):
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    conv = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        session.add(
            Outbox(
                tenant_id=tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                channel_account_id=account.id,
                recipient="15550100099",
                status="failed",
                error_code="131047",
                error_message="Re-engagement message",
            )
        )
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
    assert page.status_code == 200
    assert f'data-account="{account.external_account_id}"' in page.text
    assert "131047: Re-engagement message" in page.text and 'data-token="stored"' in page.text
    assert "never" in page.text  # no webhook received yet


async def test_a_token_meta_refused_on_the_last_send_shows_as_invalid(
    console_client, sessions, make_tenant, settings
):
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    conv = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        session.add(
            Outbox(
                tenant_id=tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                channel_account_id=account.id,
                recipient="15550100098",
                status="failed",
                error_code="190",
                error_message="Error validating access token",
            )
        )
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
    row = page.text[page.text.index(f'data-account="{account.external_account_id}"') :]
    assert 'class="badge state-failed" data-token="invalid">invalid or expired: rotate it<' in row


async def test_channels_page_shows_callback_url_verify_tokens_and_app_secret(
    console_client, sessions, make_tenant, make_settings
):
    from services.console.main import create_app

    settings = make_settings(public_base_url="https://support.example.com/", instagram_app_secret=None)
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("10.9.8.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            await log_in(client, admin)
            page = await client.get(f"/t/{tenant.slug}/channels")
    token = account_verify_token(VERIFY_TOKEN, "whatsapp", account.external_account_id)
    assert 'value="https://support.example.com/webhooks/whatsapp"' in page.text
    assert 'value="https://support.example.com/webhooks/instagram"' in page.text
    assert f'value="{token}"' in page.text and VERIFY_TOKEN not in page.text  # the account's own token
    setup_wa = page.text[page.text.index('id="setup-whatsapp"') :]
    assert setup_wa.index('data-app-secret="set"') < setup_wa.index('id="setup-instagram"')
    assert 'data-app-secret="unset"' in page.text[page.text.index('id="setup-instagram"') :]
    assert "<code>messages</code>, <code>smb_message_echoes</code>" in page.text


async def test_whatsapp_connect_checks_the_token_with_meta_and_subscribes_the_app(
    console_client, sessions, make_tenant, graph_sandbox
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number, waba, token = new_phone_number_id(), new_phone_number_id(), _token()
    async with console_client() as client:
        me = await log_in(client, admin)
        done = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp",
            {"account_id": number, "waba_id": waba, "access_token": token, "api_base": "real"},
        )
    assert done.status_code == 200, done.text[:400]
    notice = f"Connected: whatsapp {number}: Sandbox {number[-4:]} +1 555-010-{number[-4:]}"
    assert notice + f", quality GREEN; app subscribed to the business account {waba}" in done.text
    assert token not in done.text
    subscription = graph_sandbox[1].subscriptions[waba]
    assert subscription["verify_token"] == account_verify_token(VERIFY_TOKEN, "whatsapp", number)
    assert subscription["callback_url"].endswith("/webhooks/whatsapp")
    account = (await _accounts(sessions, tenant.id))["whatsapp"]
    assert (account.display_name, account.api_base_url) == (f"Sandbox {number[-4:]}", None)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (190, "Meta refused the access token: it is invalid or has expired."),
        (200, "The access token is missing a permission this needs (whatsapp_business_management"),
        (10, "The access token is missing a permission this needs (whatsapp_business_management"),
    ],
)
async def test_whatsapp_connect_refused_by_meta_says_why_and_saves_nothing(
    console_client, sessions, make_tenant, graph_sandbox, code, words
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number, token = new_phone_number_id(), _token()
    graph_sandbox[1].token_errors[token] = code
    async with console_client() as client:
        me = await log_in(client, admin)
        refused = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": number, "access_token": token}
        )
    assert refused.status_code == 422 and words in refused.text
    assert "OAuthException" not in refused.text and token not in refused.text
    assert await _accounts(sessions, tenant.id) == {}


async def test_whatsapp_connect_refuses_a_number_of_another_tenant_and_other_api_addresses(
    console_client, sessions, make_tenant, graph_sandbox, settings
):
    tenant, other = await make_tenant(), await make_tenant()
    theirs = await connect_whatsapp(sessions, other, settings)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    checks_before = len(graph_sandbox[1].subscriptions)
    async with console_client() as client:
        me = await log_in(client, admin)
        taken = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp",
            {
                "account_id": theirs.external_account_id,
                "waba_id": new_phone_number_id(),
                "access_token": _token(),
            },
        )
        assert taken.status_code == 422
        assert "This number is already connected to another business on this platform" in taken.text
        elsewhere = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp",
            {
                "account_id": new_phone_number_id(),
                "api_base": "http://169.254.169.254",
                "access_token": _token(),
            },
        )
        assert elsewhere.status_code == 422 and "can only be set by the platform" in elsewhere.text
        waba = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": new_phone_number_id(), "waba_id": "12ab"}
        )
        assert waba.status_code == 422 and "Business Account id is digits only" in waba.text
        no_token = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": new_phone_number_id(), "api_base": "real"}
        )
        assert no_token.status_code == 422 and "needs its access token" in no_token.text
    assert len(graph_sandbox[1].subscriptions) == checks_before  # Meta was never asked
    assert await _accounts(sessions, tenant.id) == {}
    assert (await _accounts(sessions, other.id))["whatsapp"].id == theirs.id


async def test_instagram_connect_checks_the_account_and_refuses_an_invalid_token(
    console_client, sessions, make_tenant, instagram_sandbox
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    ig_id, good, bad = new_phone_number_id(), _token(), _token()
    instagram_sandbox[1].token_errors[bad] = 190
    async with console_client() as client:
        me = await log_in(client, admin)
        refused = await me.post_form(
            f"/t/{tenant.slug}/channels/instagram", {"account_id": ig_id, "access_token": bad}
        )
        assert refused.status_code == 422 and "invalid or has expired" in refused.text
        assert await _accounts(sessions, tenant.id) == {}
        done = await me.post_form(
            f"/t/{tenant.slug}/channels/instagram", {"account_id": ig_id, "access_token": good}
        )
    assert done.status_code == 200 and f"Connected: instagram {ig_id}: @sandbox_{ig_id[-4:]}" in done.text
    fields = done.text[done.text.index('id="setup-instagram"') :]
    assert "<code>messages</code>, <code>messaging_postbacks</code>" in fields
    assert (await _accounts(sessions, tenant.id))["instagram"].display_name == f"Sandbox {ig_id[-4:]}"


async def test_channels_page_connects_whatsapp_and_instagram_with_write_only_tokens(
    console_client, sessions, make_tenant, console_settings
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number, ig_id, token = new_phone_number_id(), new_phone_number_id(), _token()
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
        assert f'action="/t/{tenant.slug}/channels/whatsapp"' in page.text
        assert f'action="/t/{tenant.slug}/channels/gmail/authorize"' in page.text
        wa = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp",
            {"account_id": number, "access_token": token, "display_name": "Shop line", "api_base": "real"},
        )
        assert wa.status_code == 200 and f"Connected: whatsapp {number}" in wa.text
        assert f'data-account="{number}"' in wa.text and token not in wa.text  # write-only
        ig = await me.post_form(
            f"/t/{tenant.slug}/channels/instagram", {"account_id": ig_id, "access_token": _token()}
        )
        assert ig.status_code == 200 and f'data-account="{ig_id}"' in ig.text
        again = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": number, "display_name": "Renamed"}
        )
        assert f"Updated: whatsapp {number}" in again.text
        bad = await me.post_form(f"/t/{tenant.slug}/channels/whatsapp", {"account_id": "12ab"})
        assert bad.status_code == 422 and "digits only" in bad.text
        assert (
            await me.post_form(f"/t/{tenant.slug}/channels/gmail", {"account_id": "1"})
        ).status_code == 404
    cipher = CredentialCipher(console_settings.secret("encryption_key").encode())
    rows = await _accounts(sessions, tenant.id)
    assert (rows["whatsapp"].external_account_id, rows["whatsapp"].display_name) == (number, "Renamed")
    assert rows["whatsapp"].api_base_url is None  # the real API (here: the session's Graph sandbox)
    assert access_token_of(rows["whatsapp"], cipher) == token  # kept: an empty token field changes nothing
    assert rows["instagram"].external_account_id == ig_id


async def test_rotating_a_token_checks_the_new_one_first_and_keeps_the_api(
    console_client, sessions, make_tenant, console_settings, graph_sandbox
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number, first, expired, second = new_phone_number_id(), _token(), _token(), _token()
    graph_sandbox[1].token_errors[expired] = 190
    cipher = CredentialCipher(console_settings.secret("encryption_key").encode())
    async with console_client() as client:
        me = await log_in(client, admin)
        form = {"account_id": number, "access_token": first, "api_base": "real"}
        assert (await me.post_form(f"/t/{tenant.slug}/channels/whatsapp", form)).status_code == 200
        page = await client.get(f"/t/{tenant.slug}/channels")
        assert "Rotate token" in page.text
        refused = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": number, "access_token": expired}
        )
        assert refused.status_code == 422 and "invalid or has expired" in refused.text
        assert access_token_of((await _accounts(sessions, tenant.id))["whatsapp"], cipher) == first
        rotated = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": number, "access_token": second}
        )
        assert rotated.status_code == 200 and f"Updated: whatsapp {number}" in rotated.text
    account = (await _accounts(sessions, tenant.id))["whatsapp"]
    assert access_token_of(account, cipher) == second and account.api_base_url is None


async def test_disconnect_closes_the_accounts_open_conversations_and_forgets_its_token(
    console_client, sessions, make_tenant, settings
):
    tenant, other = await make_tenant(), await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    kept = await connect_whatsapp(sessions, tenant, settings)
    theirs = await connect_whatsapp(sessions, other, settings)
    opened = []
    async with sessions() as session, session.begin():
        for channel_account in (account, account, kept):
            customer = Customer(
                tenant_id=tenant.id, channel="whatsapp", external_user_id=uuid.uuid4().hex[:12]
            )
            session.add(customer)
            await session.flush()
            conversation = await start_conversation(
                session, customer=customer, channel_account_id=channel_account.id
            )
            opened.append(conversation.id)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():  # a person has the second one
        taken = await session.get(Conversation, opened[1])
        await to_console_user(session, taken, user_id=admin.id, reason="a person took it")
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
        assert "Its open conversations are closed" in page.text
        stranger = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp/{theirs.external_account_id}/disconnect"
        )
        assert stranger.status_code == 404
        done = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp/{account.external_account_id}/disconnect"
        )
        assert done.status_code == 200, done.text[:300]
        assert (
            f"Disconnected: whatsapp {account.external_account_id}: 2 open conversation(s) closed"
            in done.text
        )
        assert 'data-token="inactive"' in done.text
    async with sessions() as session:
        statuses = {
            c.id: c.status
            for c in (await session.exec(select(Conversation).where(Conversation.id.in_(opened)))).all()  # type: ignore[attr-defined]
        }
        row = await session.get(ChannelAccount, account.id)
        theirs_row = await session.get(ChannelAccount, theirs.id)
    assert [statuses[i] for i in opened] == ["closed", "closed", "ai"]  # the one a person had too
    assert row is not None and (row.is_active, row.credentials_encrypted) == (False, None)
    assert theirs_row is not None and theirs_row.is_active


async def test_channels_page_connects_a_gmail_mailbox_through_the_google_sandbox(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    mailbox = new_mailbox()
    client_json = json.dumps(
        {"installed": {"client_id": SECRETS.client_id, "client_secret": SECRETS.client_secret}}
    )
    async with console_client() as client:
        me = await log_in(client, admin)
        bad = await me.post_form(f"/t/{tenant.slug}/channels/gmail/authorize", {"client_secrets": "{}"})
        assert bad.status_code == 422 and "OAuth client JSON" in bad.text
        start = await me.post_form(
            f"/t/{tenant.slug}/channels/gmail/authorize",
            {"client_secrets": client_json, "login_hint": mailbox},
        )
        assert start.status_code == 303
        async with httpx.AsyncClient() as google:  # the sandbox grants consent at once and redirects back
            consent = await google.get(start.headers["location"])
        assert consent.status_code == 302
        back = urlsplit(consent.headers["location"])
        assert back.path == f"/t/{tenant.slug}/channels/gmail/callback"
        done = await client.get(f"{back.path}?{back.query}")
        assert done.status_code == 200, done.text[:300]
        assert f"Connected: gmail {mailbox}" in done.text and f'data-account="{mailbox}"' in done.text
        replayed = await client.get(f"{back.path}?{back.query}")  # the code is used up
        assert replayed.status_code == 422
        assert SECRETS.client_secret not in done.text
        assert 'data-sync="polling">Polling' in done.text  # no Pub/Sub topic: the mailbox is polled
    async with sessions() as session, session.begin():
        row = (await session.exec(select(GmailMailbox).where(GmailMailbox.email == mailbox))).one()
        row.watch_expiration_ms = int((datetime.now(UTC) + timedelta(days=6)).timestamp() * 1000)
        session.add(row)
    assert (row.tenant_id, row.status) == (tenant.id, "active")
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
    until = (datetime.now(UTC) + timedelta(days=6)).strftime("%Y-%m-%d")
    assert f'data-sync="push">Push until {until}' in page.text


async def test_refusals_and_the_page_speak_spanish(console_client, sessions, make_tenant, graph_sandbox):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number, token = new_phone_number_id(), _token()
    graph_sandbox[1].token_errors[token] = 190
    async with console_client(**{"Accept-Language": "es-ES,es;q=0.9"}) as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
        assert "Token de verificación" in page.text and "URL de devolución de llamada" in page.text
        refused = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": number, "access_token": token}
        )
        digits = await me.post_form(f"/t/{tenant.slug}/channels/whatsapp", {"account_id": "x1"})
    assert refused.status_code == 422 and "Meta rechazó el token de acceso" in refused.text
    assert digits.status_code == 422 and "El phone_number_id solo lleva dígitos." in digits.text


async def test_a_callback_meta_cannot_verify_is_refused_and_nothing_saved(
    console_client, sessions, make_tenant, console_settings
):
    """The WhatsApp service (its Graph sandbox making Meta's handshake) runs with another verify token
    than the console: the handshake gets 403, Meta's answer is error 2200."""
    from services.whatsapp.main import create_app

    whatsapp = create_app(
        console_settings.model_copy(
            update={"whatsapp_sandbox_enabled": True, "meta_verify_token": "another-one"}
        )
    )
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    form = {"account_id": new_phone_number_id(), "waba_id": new_phone_number_id(), "api_base": "sandbox"}
    async with serve_app(whatsapp, port=console_settings.whatsapp_port), console_client() as client:
        me = await log_in(client, admin)
        refused = await me.post_form(f"/t/{tenant.slug}/channels/whatsapp", form)
    assert refused.status_code == 422 and "Meta could not verify the callback URL" in refused.text
    assert await _accounts(sessions, tenant.id) == {}


async def test_meta_out_of_reach_is_refused_with_the_address_tried(
    console_client, sessions, make_tenant, console_settings
):
    tenant = await make_tenant()  # no WhatsApp service runs: its sandbox does not answer
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    number = new_phone_number_id()
    async with console_client() as client:
        me = await log_in(client, admin)
        refused = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp", {"account_id": number, "api_base": "sandbox"}
        )
    tried = f"{console_settings.whatsapp_sandbox_url}/{console_settings.whatsapp_api_version}/{number}"
    assert refused.status_code == 422 and f"Could not reach Meta at {tried} (ConnectError)" in refused.text
    assert await _accounts(sessions, tenant.id) == {}
