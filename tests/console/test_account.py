"""The account page: changing one's own password (common ones refused), what happens to sessions and API
tokens, revoking the tokens."""

from __future__ import annotations

from sqlmodel import select
from switchboard.db.models import ApiToken, Role
from switchboard.users import SESSION_COOKIE, create_api_token, create_user, set_password

from tests.utils.console import PASSWORD, log_in, new_user

NEW_PASSWORD = "tangerine orbit ladder"


def _conversations(tenant_slug: str) -> str:
    return f"/v1/admin/tenants/{tenant_slug}/conversations"


async def test_a_password_change_ends_other_sessions_and_says_api_tokens_still_work(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        token = await create_api_token(session, user=user, name="script")
    async with console_client() as other_browser, console_client() as client:
        await log_in(other_browser, user)
        me = await log_in(client, user)
        page = await client.get("/account")
        assert page.status_code == 200 and "Active API tokens: 1." in page.text
        changed = await me.post_form(
            "/account/password",
            {"current_password": PASSWORD, "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD},
        )
        assert changed.status_code == 200, changed.text[:500]
        assert "Your password has been changed" in changed.text
        assert "Your API tokens (1) still work" in changed.text and "/account/tokens/revoke" in changed.text
        # this browser got a new session; the other one is logged out
        assert (await client.get(f"/t/{tenant.slug}/inbox")).status_code == 200
        assert (await other_browser.get(f"/t/{tenant.slug}/inbox")).status_code == 303
        # the token still works, as the page said
        bearer = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        assert (await client.get(_conversations(tenant.slug), headers=bearer)).status_code == 200
        # revoke them from the page (the form carries the new session's CSRF token)
        csrf = changed.text.split('name="csrf_token" value="')[1].split('"')[0]
        revoked = await client.post("/account/tokens/revoke", data={"csrf_token": csrf})
        assert revoked.status_code == 200 and "API tokens revoked: 1." in revoked.text
        assert "Active API tokens: 0." in revoked.text
        assert (await client.get(_conversations(tenant.slug), headers=bearer)).status_code == 401
    async with sessions() as session:
        rows = (await session.exec(select(ApiToken).where(ApiToken.user_id == user.id))).all()
    assert [row.revoked_at is not None for row in rows] == [True]


async def test_the_account_page_refuses_a_common_or_mistyped_password(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, user)
        common = await me.post_form(
            "/account/password",
            {"current_password": PASSWORD, "new_password": "password12", "new_password_again": "password12"},
        )
        assert common.status_code == 400 and "commonly used passwords" in common.text
        wrong = await me.post_form(
            "/account/password",
            {
                "current_password": "not my password",
                "new_password": NEW_PASSWORD,
                "new_password_again": NEW_PASSWORD,
            },
        )
        assert wrong.status_code == 400 and "current password is wrong" in wrong.text
        differ = await me.post_form(
            "/account/password",
            {
                "current_password": PASSWORD,
                "new_password": NEW_PASSWORD,
                "new_password_again": NEW_PASSWORD + "!",
            },
        )
        assert differ.status_code == 400 and "differ" in differ.text
        no_csrf = await client.post(
            "/account/password",
            data={
                "current_password": PASSWORD,
                "new_password": NEW_PASSWORD,
                "new_password_again": NEW_PASSWORD,
            },
        )
        assert no_csrf.status_code == 403
        assert client.cookies.get(SESSION_COOKIE)  # nothing changed: still logged in with the old password
    async with console_client() as again:
        await log_in(again, user)


async def test_every_place_a_password_is_set_refuses_a_common_one(cli, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    for weak in ("password12", "Password12", "qwertyuiop", "iloveyou123", "  dragon2024!"):
        async with sessions() as session:
            for call in (
                create_user(
                    session, email="weak@example.com", password=weak, role=Role.agent, tenant_id=tenant.id
                ),
                set_password(session, email=user.email, password=weak),
            ):
                try:
                    await call
                except ValueError as exc:
                    assert "commonly used" in str(exc), weak
                else:
                    raise AssertionError(f"{weak!r} was accepted")
            await session.rollback()
    added = await cli.arun(
        "users", "add", "weak@example.com", "--tenant", tenant.slug, "--password", "password12"
    )
    assert added.exit_code == 2 and "commonly used" in added.output
    passwd = await cli.arun("users", "passwd", user.email, "--password", "password12")
    assert passwd.exit_code == 2 and "commonly used" in passwd.output
    help_text = await cli.arun("users", "passwd", "--help")
    assert "--revoke-tokens" in help_text.output


async def test_cli_passwd_says_api_tokens_still_work_and_revokes_them_on_request(cli, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with sessions() as session, session.begin():
        await create_api_token(session, user=user, name="one")
        await create_api_token(session, user=user, name="two")
    kept = await cli.arun("users", "passwd", user.email, "--password", NEW_PASSWORD)
    assert kept.exit_code == 0 and "their 2 API token(s) still work" in kept.output
    revoked = await cli.arun("users", "passwd", user.email, "--password", PASSWORD, "--revoke-tokens")
    assert revoked.exit_code == 0 and "API tokens revoked: 2" in revoked.output
    async with sessions() as session:
        rows = (await session.exec(select(ApiToken).where(ApiToken.user_id == user.id))).all()
    assert len(rows) == 2 and all(row.revoked_at is not None for row in rows)
