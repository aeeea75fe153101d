"""Login, logout, sessions, CSRF and the login rate limit of the console."""

from __future__ import annotations

from switchboard.db.models import Role
from switchboard.users import SESSION_COOKIE

from tests.utils.console import PASSWORD, log_in, new_user


async def test_login_shows_the_inbox_and_logout_ends_the_session(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        first = await client.get(f"/t/{tenant.slug}/inbox")
        assert first.status_code == 303 and first.headers["location"].startswith("/login?next=")
        me = await log_in(client, user)
        cookie = client.cookies.get(SESSION_COOKIE)
        assert cookie
        inbox = await client.get(f"/t/{tenant.slug}/inbox")
        assert inbox.status_code == 200 and "<h1>Inbox</h1>" in inbox.text
        out = await me.post_form("/logout")
        assert out.status_code == 303
        client.cookies.set(SESSION_COOKIE, cookie)
        again = await client.get(f"/t/{tenant.slug}/inbox")
        assert again.status_code == 303  # the old cookie no longer opens anything


async def test_session_cookie_is_http_only_and_same_site_lax(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        response = await client.post("/login", data={"email": user.email.upper(), "password": PASSWORD})
    header = response.headers["set-cookie"].lower()
    assert response.status_code == 303
    assert f"{SESSION_COOKIE}=" in header and "httponly" in header and "samesite=lax" in header


async def test_wrong_password_is_refused_and_repeated_failures_are_rate_limited(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        for _ in range(5):
            bad = await client.post("/login", data={"email": user.email, "password": "wrong password!"})
            assert bad.status_code == 401 and "Wrong e-mail or password." in bad.text
        limited = await client.post("/login", data={"email": user.email, "password": PASSWORD})
    assert limited.status_code == 429
    assert "Too many failed sign-in attempts" in limited.text and int(limited.headers["retry-after"]) > 0


async def test_a_form_without_the_csrf_token_is_refused(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, user)
        refused = await client.post("/logout", data={})
        assert refused.status_code == 403
        assert (await client.get(f"/t/{tenant.slug}/inbox")).status_code == 200  # still logged in


async def test_an_e_mail_the_database_cannot_hold_is_a_failed_login(console_client, sessions, make_tenant):
    """A NUL or an unpaired surrogate in the address matches no account: 401 as for a wrong password."""
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        for email in (user.email + "\x00", "\x00" + user.email):
            refused = await client.post("/login", data={"email": email, "password": PASSWORD})
            assert refused.status_code == 401, refused.text
            assert "Wrong e-mail or password." in refused.text
        raw = f"email={user.email}%00%ED%A0%80&password={PASSWORD}".encode()  # a surrogate's UTF-8 bytes
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        refused = await client.post("/login", content=raw, headers=form)
        assert refused.status_code == 401, refused.text
