"""People from the console: invitations (link, e-mail, set-password page), deactivation, human agents,
and a tenant created with its first admin's invitation; every refusal over HTTP."""

from __future__ import annotations

import asyncio
import re
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from email import message_from_bytes
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import update
from sqlmodel import select
from switchboard.db.models import ConsoleInvite, ConsoleUser, HumanAgent, Role, Tenant, utcnow
from switchboard.users import SESSION_COOKIE, authenticate

from services.console.main import create_app
from tests.utils.console import PASSWORD, log_in, new_user
from tests.utils.handoff import random_phone

LINK = re.compile(r'id="invite-link" readonly value="(http[^"]+/invite/([A-Za-z0-9_-]+))"')
GOOD_PASSWORD = "violet harbor seventeen"


def _link(page: httpx.Response) -> tuple[str, str]:
    match = LINK.search(page.text)
    assert match, page.text[:2000]
    return match.group(1), match.group(2)


async def _accept(
    client: httpx.AsyncClient, token: str, password: str = GOOD_PASSWORD, again: str | None = None
):
    return await client.post(
        f"/invite/{token}", data={"password": password, "password_again": again or password, "name": "Pat"}
    )


async def test_invited_agent_sets_a_password_once_and_lands_on_the_inbox(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    email = f"pat-{uuid.uuid4().hex[:6]}@example.com"
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await me.post_form(
            f"/t/{tenant.slug}/people/invites", {"email": email.upper(), "role": "agent"}
        )
        assert page.status_code == 200
        link, token = _link(page)
        assert link == f"http://console.test/invite/{token}"
        assert "was not e-mailed" in page.text  # no SMTP server in these settings
        assert f'data-invite="{email}"' in page.text
    async with sessions() as session:
        stored = (await session.exec(select(ConsoleInvite).where(ConsoleInvite.email == email))).one()
    assert token not in stored.token_hash and len(stored.token_hash) == 64  # only its hash is kept
    assert timedelta(hours=71) < stored.expires_at - stored.created_at <= timedelta(hours=72)

    async with console_client() as guest:
        form = await guest.get(f"/invite/{token}")
        assert form.status_code == 200 and email in form.text and 'name="password_again"' in form.text
        assert form.headers["referrer-policy"] == "same-origin"  # the token never leaves in a Referer
        weak = await _accept(guest, token, "password12")
        assert weak.status_code == 400 and "commonly used passwords" in weak.text
        short = await _accept(guest, token, "short")
        assert short.status_code == 400 and "at least 10 characters" in short.text
        differ = await _accept(guest, token, GOOD_PASSWORD, "violet harbor eighteen")
        assert differ.status_code == 400 and "The two passwords differ." in differ.text
        done = await _accept(guest, token)
        assert done.status_code == 303 and done.headers["location"] == "/"
        assert guest.cookies.get(SESSION_COOKIE)
        home = await guest.get("/", follow_redirects=False)
        assert home.headers["location"] == f"/t/{tenant.slug}/inbox"  # an agent lands on the inbox
        assert (await guest.get(home.headers["location"])).status_code == 200
    async with console_client() as again:
        used = await again.get(f"/invite/{token}")
        assert used.status_code == 410 and "was used already" in used.text
        second = await _accept(again, token, "another fine password")
        assert second.status_code == 410
    async with sessions() as session:
        user = (await session.exec(select(ConsoleUser).where(ConsoleUser.email == email))).one()
        assert (user.role, user.tenant_id, user.name) == ("agent", tenant.id, "Pat")
        assert await authenticate(session, email=email, password=GOOD_PASSWORD) is not None


async def test_expired_withdrawn_replaced_and_unknown_links_are_refused(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, admin)
        first = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "late@example.com"})
        _, expired_token = _link(first)
        async with sessions() as session, session.begin():
            await session.execute(
                update(ConsoleInvite)
                .where(ConsoleInvite.email == "late@example.com", ConsoleInvite.tenant_id == tenant.id)
                .values(expires_at=utcnow() - timedelta(minutes=1))
            )
        listed = await client.get(f"/t/{tenant.slug}/people")
        assert "expired" in listed.text
        second = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "kim@example.com"})
        _, old_token = _link(second)
        async with sessions() as session:
            invite = (
                await session.exec(
                    select(ConsoleInvite).where(
                        ConsoleInvite.tenant_id == tenant.id, ConsoleInvite.email == "kim@example.com"
                    )
                )
            ).one()
        resent = await me.post_form(f"/t/{tenant.slug}/people/invites/{invite.id}/resend")
        assert resent.status_code == 200
        _, new_token = _link(resent)
        assert new_token != old_token
        third = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "lou@example.com"})
        _, withdrawn_token = _link(third)
        async with sessions() as session:
            lou = (
                await session.exec(
                    select(ConsoleInvite).where(
                        ConsoleInvite.tenant_id == tenant.id, ConsoleInvite.email == "lou@example.com"
                    )
                )
            ).one()
        revoked = await me.post_form(f"/t/{tenant.slug}/people/invites/{lou.id}/revoke")
        assert revoked.status_code == 200 and 'data-invite="lou@example.com"' not in revoked.text
    async with console_client() as guest:
        expired = await guest.get(f"/invite/{expired_token}")
        assert expired.status_code == 410 and "has expired" in expired.text
        assert (await _accept(guest, expired_token)).status_code == 410
        replaced = await guest.get(f"/invite/{old_token}")
        assert replaced.status_code == 410 and "newer one was sent" in replaced.text
        assert (await _accept(guest, withdrawn_token)).status_code == 410
        unknown = await guest.get("/invite/not-a-real-token")
        assert unknown.status_code == 404 and "not valid" in unknown.text
        assert (await _accept(guest, new_token)).status_code == 303  # the newest link works
    async with sessions() as session:
        made = (await session.exec(select(ConsoleUser).where(ConsoleUser.tenant_id == tenant.id))).all()
    assert sorted(u.email for u in made) == sorted([admin.email, "kim@example.com"])


async def test_an_invite_post_from_another_site_is_refused(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, admin)
        _, token = _link(await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "x@example.com"}))
    async with console_client(**{"Sec-Fetch-Site": "cross-site"}) as evil:
        assert (await _accept(evil, token)).status_code == 403
    async with console_client() as guest:
        assert (await guest.get(f"/invite/{token}")).status_code == 200  # still unused


async def test_people_refusals_by_role_and_tenant(console_client, sessions, make_tenant):
    tenant, other = await make_tenant(), await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    agent_user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    theirs = await new_user(sessions, role=Role.tenant_admin, tenant_id=other.id)
    async with console_client() as client:
        them = await log_in(client, theirs)
        _, _token = _link(await them.post_form(f"/t/{other.slug}/people/invites", {"email": "o@example.com"}))
    async with sessions() as session:
        their_invite = (
            await session.exec(select(ConsoleInvite).where(ConsoleInvite.tenant_id == other.id))
        ).one()
    async with console_client() as client:
        me = await log_in(client, agent_user)
        assert (await client.get(f"/t/{tenant.slug}/people")).status_code == 403
        for path, data in (
            ("people/invites", {"email": "sneaky@example.com", "role": "tenant_admin"}),
            ("people/agents", {"name": "Sneaky", "phone": "+15550109999"}),
            (f"people/users/{admin.id}/deactivate", {}),
        ):
            assert (await me.post_form(f"/t/{tenant.slug}/{path}", data)).status_code == 403, path
        assert (await client.get(f"/t/{tenant.slug}/home")).status_code == 403
    async with console_client() as client:
        me = await log_in(client, admin)
        # another tenant's pages and rows: the same answer as an unknown tenant or id
        assert (await client.get(f"/t/{other.slug}/people")).status_code == 404
        assert (
            await me.post_form(f"/t/{other.slug}/people/invites", {"email": "a@example.com"})
        ).status_code == 404
        for action in ("resend", "revoke"):
            answer = await me.post_form(f"/t/{tenant.slug}/people/invites/{their_invite.id}/{action}")
            assert answer.status_code == 404, action
        assert (
            await me.post_form(f"/t/{tenant.slug}/people/users/{theirs.id}/deactivate")
        ).status_code == 404
        # no platform admins from a tenant, no e-mail that signs in already, no malformed address
        assert (
            await me.post_form(
                f"/t/{tenant.slug}/people/invites", {"email": "p@example.com", "role": "platform_admin"}
            )
        ).status_code == 422
        taken = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": theirs.email})
        assert taken.status_code == 422 and "already signs in" in taken.text
        bad = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "not an address"})
        assert bad.status_code == 422 and "not an e-mail address" in bad.text
    async with sessions() as session:
        invites = (
            await session.exec(select(ConsoleInvite).where(ConsoleInvite.tenant_id == tenant.id))
        ).all()
        assert invites == []
        assert (await session.get(ConsoleUser, theirs.id)).is_active


async def test_deactivate_ends_sessions_and_reactivate_lets_them_back(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    agent_user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as agent_client, console_client() as admin_client:
        await log_in(agent_client, agent_user)
        me = await log_in(admin_client, admin)
        off = await me.post_form(f"/t/{tenant.slug}/people/users/{agent_user.id}/deactivate")
        assert off.status_code == 200 and "can no longer sign in" in off.text
        assert (await agent_client.get(f"/t/{tenant.slug}/inbox")).status_code in (303, 401)
        refused = await agent_client.post("/login", data={"email": agent_user.email, "password": PASSWORD})
        assert refused.status_code == 401
        self_off = await me.post_form(f"/t/{tenant.slug}/people/users/{admin.id}/deactivate")
        assert self_off.status_code == 409 and "your own account" in self_off.text
        on = await me.post_form(f"/t/{tenant.slug}/people/users/{agent_user.id}/reactivate")
        assert on.status_code == 200 and "can sign in again" in on.text
        back = await agent_client.post("/login", data={"email": agent_user.email, "password": PASSWORD})
        assert back.status_code == 303


async def test_human_agents_added_set_online_offline_and_removed(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    phone = random_phone()
    async with console_client() as client:
        me = await log_in(client, admin)
        for bad_phone in ("12", "+1 555", "call me"):
            refused = await me.post_form(
                f"/t/{tenant.slug}/people/agents", {"name": "Nia", "phone": bad_phone}
            )
            assert refused.status_code == 422 and "not a valid phone number" in refused.text, bad_phone
        nameless = await me.post_form(f"/t/{tenant.slug}/people/agents", {"name": " ", "phone": "+" + phone})
        assert nameless.status_code == 422 and "Give the agent" in nameless.text
        added = await me.post_form(
            f"/t/{tenant.slug}/people/agents",
            {"name": "Nia Costa", "phone": f"+{phone[0]} {phone[1:4]} {phone[4:]}"},
        )
        assert (
            added.status_code == 200
            and 'data-agent="Nia Costa"' in added.text
            and "Nia Costa was added" in added.text
        )
        twice = await me.post_form(
            f"/t/{tenant.slug}/people/agents", {"name": "Nia Again", "phone": "+" + phone}
        )
        assert twice.status_code == 422 and "exists already" in twice.text
        async with sessions() as session:
            agent = (await session.exec(select(HumanAgent).where(HumanAgent.tenant_id == tenant.id))).one()
        assert (agent.phone, agent.status) == (phone, "offline")
        online = await me.post_form(f"/t/{tenant.slug}/people/agents/{agent.id}/online")
        assert online.status_code == 200 and "Nia Costa is online" in online.text
        async with sessions() as session:
            assert (await session.get(HumanAgent, agent.id)).status == "online"
        offline = await me.post_form(f"/t/{tenant.slug}/people/agents/{agent.id}/offline")
        assert offline.status_code == 200 and "Nia Costa is offline" in offline.text
        removed = await me.post_form(f"/t/{tenant.slug}/people/agents/{agent.id}/remove")
        assert removed.status_code == 200 and 'data-agent="Nia Costa"' not in removed.text
        assert (await me.post_form(f"/t/{tenant.slug}/people/agents/{agent.id}/online")).status_code == 404
    async with sessions() as session:
        assert (await session.exec(select(HumanAgent).where(HumanAgent.tenant_id == tenant.id))).all() == []


async def test_platform_admin_creates_a_tenant_with_its_first_admin_invite(console_client, sessions):
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    slug = f"shop-{uuid.uuid4().hex[:8]}"
    email = f"owner-{uuid.uuid4().hex[:6]}@example.com"
    async with console_client() as client:
        me = await log_in(client, platform)
        refused = await me.post_form(
            "/platform/tenants", {"slug": slug, "name": "Shop", "admin_email": "nobody-at-all"}
        )
        assert refused.status_code == 422 and "not an e-mail address" in refused.text
        async with sessions() as session:  # both or neither: no tenant without its admin's invitation
            assert (await session.exec(select(Tenant).where(Tenant.slug == slug))).first() is None
        created = await me.post_form(
            "/platform/tenants",
            {"slug": slug, "name": "Corner Shop", "admin_email": email, "admin_name": "Owner"},
        )
        assert created.status_code == 200 and f'data-tenant="{slug}"' in created.text
        _, token = _link(created)
    async with console_client() as owner:
        form = await owner.get(f"/invite/{token}")
        assert form.status_code == 200 and "Corner Shop" in form.text and "as Admin" in form.text
        assert (await _accept(owner, token)).status_code == 303
        home = await owner.get("/", follow_redirects=True)
        assert str(home.url).endswith(f"/t/{slug}/home") and 'id="checklist"' in home.text


@asynccontextmanager
async def smtp_sink() -> AsyncIterator[tuple[int, list[Any]]]:
    """An SMTP server on loopback that keeps what it receives: ``(port, messages)``."""
    received: list[Any] = []

    class Keep:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
            received.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
            return "250 OK"

    with socket.socket() as probe:  # a free port (the controller's readiness check needs a real one)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    await asyncio.to_thread(controller.start)
    try:
        yield port, received
    finally:
        await asyncio.to_thread(controller.stop)


@pytest.fixture
async def mailing_console(make_settings, settings):
    """A console whose invitations go to a local SMTP sink; ``(client factory, received)``."""
    async with smtp_sink() as (port, received):
        app = create_app(
            make_settings(
                orchestrator_port=settings.orchestrator_port,
                smtp_host="127.0.0.1",
                smtp_port=port,
                smtp_starttls=False,
                smtp_from="Switchboard <no-reply@example.com>",
                console_public_url="https://console.example.com/",
            )
        )
        async with app.router.lifespan_context(app):

            def client() -> httpx.AsyncClient:
                return httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app, client=("10.9.8.7", 40000)),
                    base_url="http://console.test",
                    headers={"Accept": "text/html"},
                )

            yield client, received


async def test_invitation_is_e_mailed_through_the_smtp_server(mailing_console, sessions, make_tenant):
    client_factory, received = mailing_console
    tenant = await make_tenant("Mail Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Ana")
    async with client_factory() as client:
        me = await log_in(client, admin)
        page = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "new@example.com"})
        assert page.status_code == 200 and "It was e-mailed to them." in page.text
        link, token = _link(page)
    assert link == f"https://console.example.com/invite/{token}"  # CONSOLE_PUBLIC_URL, not the request's host
    assert len(received) == 1
    recipients, mail = received[0]
    assert recipients == ["new@example.com"] and mail["From"] == "Switchboard <no-reply@example.com>"
    assert mail["Subject"] == "You are invited to Mail Shop on Switchboard"
    body = mail.get_payload(decode=True).decode()
    assert link in body and "Ana invites you" in body


async def test_an_unreachable_smtp_server_still_shows_the_link(
    make_settings, settings, sessions, make_tenant
):
    async with smtp_sink() as (port, _):
        pass  # the port is free again: nothing listens
    app = create_app(
        make_settings(
            orchestrator_port=settings.orchestrator_port,
            smtp_host="127.0.0.1",
            smtp_port=port,
            smtp_starttls=False,
            smtp_timeout_s=2,
        )
    )
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("10.9.8.6", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            me = await log_in(client, admin)
            page = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "lost@example.com"})
    assert page.status_code == 200
    assert "could not be sent" in page.text and f"127.0.0.1:{port}" not in page.text  # no server detail
    _link(page)


async def test_people_pages_speak_spanish(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client(**{"Accept-Language": "es"}) as client:
        me = await log_in(client, admin)
        page = await me.post_form(f"/t/{tenant.slug}/people/invites", {"email": "ines@example.com"})
        assert (
            "Invitaciones pendientes" in page.text and "Invitación lista para ines@example.com." in page.text
        )
        _, token = _link(page)
        phone = await me.post_form(f"/t/{tenant.slug}/people/agents", {"name": "Nia", "phone": "12"})
        assert "Ese no es un número de teléfono válido" in phone.text
        home = await client.get(f"/t/{tenant.slug}/home")
        assert "Lista de configuración" in home.text and "Conecte un canal y compruébelo" in home.text
    async with console_client(**{"Accept-Language": "es"}) as guest:
        weak = await _accept(guest, token, "password12")
        assert weak.status_code == 400 and "lista de contraseñas de uso común" in weak.text
        await _accept(guest, token)
        used = await guest.get(f"/invite/{token}")
        assert "Este enlace de invitación ya se usó." in used.text
