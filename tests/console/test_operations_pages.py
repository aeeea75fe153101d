"""Tools (enable/disable, configuration), channels (account health) and people pages."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlsplit

import httpx
from sqlmodel import select
from switchboard.channels.accounts import access_token_of
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, GmailMailbox, Outbox, Role
from switchboard.handoff import add_agent
from switchboard.tools.toolbox import list_assignments

from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user
from tests.utils.gmail import SECRETS, new_mailbox
from tests.utils.handoff import random_phone
from tests.utils.whatsapp import connect_whatsapp, new_phone_number_id


async def test_tools_page_enables_configures_and_refuses_bad_json(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session:
        name = (await list_assignments(session, tenant.id))[0].tool_name
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/tools")
        assert page.status_code == 200 and f'data-tool="{name}" data-enabled="no"' in page.text
        on = await me.post_form(f"/t/{tenant.slug}/tools/{name}", {"enabled": "on"})
        assert f'data-tool="{name}" data-enabled="yes"' in on.text
        bad = await me.post_form(f"/t/{tenant.slug}/tools/{name}", {"custom_config": "{not json"})
        assert bad.status_code == 422 and "not JSON" in bad.text
        ok = await me.post_form(f"/t/{tenant.slug}/tools/{name}", {"custom_config": '{"limit": 3}'})
        assert ok.status_code == 200
    async with sessions() as session:
        tool = next(t for t in await list_assignments(session, tenant.id) if t.tool_name == name)
    assert tool.enabled and tool.custom_config == {"limit": 3}


async def test_channels_page_shows_each_accounts_health(console_client, sessions, make_tenant, settings):
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    conv = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        session.add(
            Outbox(
                tenant_id=tenant.id, conversation_id=conv.conversation.id, channel="whatsapp",
                channel_account_id=account.id, recipient="15550100099", status="failed",
                error_code="131047", error_message="Re-engagement message",
            )
        )  # fmt: skip
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
    assert page.status_code == 200
    assert f'data-account="{account.external_account_id}"' in page.text
    assert "131047: Re-engagement message" in page.text and 'data-token="stored"' in page.text
    assert "never" in page.text  # no webhook received yet


async def test_people_page_lists_agents_with_state_and_load(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        await add_agent(session, tenant_id=tenant.id, name="Nia", phone=random_phone(), online=True)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    agent_user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/people")
        assert page.status_code == 200 and 'data-agent="Nia"' in page.text and "online" in page.text
        assert agent_user.email in page.text
    async with console_client() as client:
        await log_in(client, agent_user)
        for path in ("tools", "channels", "people"):
            assert (await client.get(f"/t/{tenant.slug}/{path}")).status_code == 403, path


async def test_channels_page_connects_whatsapp_and_instagram_with_write_only_tokens(
    console_client, sessions, make_tenant, console_settings
):
    tenant, other = await make_tenant(), await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    theirs = await new_user(sessions, role=Role.tenant_admin, tenant_id=other.id)
    number, ig_id, token = new_phone_number_id(), new_phone_number_id(), f"EAAG-{uuid.uuid4().hex}"
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
        assert f'action="/t/{tenant.slug}/channels/whatsapp"' in page.text
        assert f'action="/t/{tenant.slug}/channels/gmail/authorize"' in page.text
        wa = await me.post_form(
            f"/t/{tenant.slug}/channels/whatsapp",
            {"account_id": number, "access_token": token, "display_name": "Shop line", "api_base": "sandbox"},
        )
        assert wa.status_code == 200 and f"Connected: whatsapp {number}" in wa.text
        assert f'data-account="{number}"' in wa.text and token not in wa.text  # write-only
        ig = await me.post_form(f"/t/{tenant.slug}/channels/instagram", {"account_id": ig_id})
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
    async with console_client() as client:
        stranger = await log_in(client, theirs)
        taken = await stranger.post_form(f"/t/{other.slug}/channels/whatsapp", {"account_id": number})
        assert taken.status_code == 422 and "already connected to another tenant" in taken.text
    cipher = CredentialCipher(console_settings.secret("encryption_key").encode())
    async with sessions() as session:
        rows = {
            a.channel: a
            for a in (
                await session.exec(select(ChannelAccount).where(ChannelAccount.tenant_id == tenant.id))
            ).all()
        }
    assert (rows["whatsapp"].external_account_id, rows["whatsapp"].display_name) == (number, "Renamed")
    assert rows["whatsapp"].api_base_url == "sandbox"
    assert access_token_of(rows["whatsapp"], cipher) == token  # kept: an empty token field changes nothing
    assert (rows["instagram"].external_account_id, rows["instagram"].credentials_encrypted) == (ig_id, None)


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
    async with sessions() as session:
        row = (await session.exec(select(GmailMailbox).where(GmailMailbox.email == mailbox))).one()
    assert (row.tenant_id, row.status) == (tenant.id, "active")
