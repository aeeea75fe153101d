"""The API keys page (tenant admins), in a real headless Chromium: create a key (shown once), call the
public API with it, see it listed with its last use, revoke it, and the API refuses it at once. An agent
may not open the page; the admin API lists, creates and revokes the same keys."""

from __future__ import annotations

import re

import httpx
from switchboard.db.models import Role
from switchboard.users import create_api_token

from tests.utils.console import PASSWORD, log_in, new_user


async def test_an_admin_creates_uses_and_revokes_a_key_in_the_browser(
    page, console_url, make_tenant, sessions, screenshot
) -> None:
    shop = await make_tenant("Browser Key Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.id)
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", admin.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.goto(f"{console_url}/t/{shop.slug}/inbox")
    await page.click("nav >> text=API keys")
    await page.wait_for_url(re.compile(rf"/t/{shop.slug}/api-keys$"))
    assert await page.is_visible("#no-keys")
    await page.fill("input[name=name]", "shop backend")
    await page.check("input[value='conversations:read']")
    await page.select_option("select[name=expires_in_days]", "30")
    await page.click("text=Create key")
    key = (await page.inner_text("#new-key-value")).strip()
    assert key.startswith("sbk_")
    row = page.locator("#keys tr[data-state=active]")
    assert await row.count() == 1
    assert "shop backend" in await row.inner_text() and key[:12] in await row.inner_text()
    await screenshot(page, "api-keys")

    async with httpx.AsyncClient(base_url=console_url, headers={"Authorization": f"Bearer {key}"}) as api:
        assert (await api.get("/api/v1/conversations")).status_code == 200
        assert (await api.get("/api/v1/leads")).json()["code"] == "insufficient_scope"
        await page.goto(f"{console_url}/t/{shop.slug}/api-keys")  # the new key is never shown again
        assert await page.locator("#new-key").count() == 0
        assert "never" not in (await row.locator("td").nth(5).inner_text())  # last used: now
        await row.locator("text=Revoke").click()
        await page.wait_for_selector("#keys tr[data-state=inactive]")
        assert "revoked" in await page.inner_text("#keys")
        refused = await api.get("/api/v1/conversations")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"


async def test_the_page_is_for_admins_and_the_admin_api_manages_the_same_keys(
    console_client, make_tenant, sessions
) -> None:
    shop = await make_tenant("Admin Api Key Shop")
    agent = await new_user(sessions, role=Role.agent, tenant_id=shop.id)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.id)
    async with console_client() as client:
        await log_in(client, agent)
        assert (await client.get(f"/t/{shop.slug}/api-keys")).status_code == 403
    async with sessions() as session:
        token = await create_api_token(session, user=admin, name="laptop")
        await session.commit()
    async with console_client(Authorization=f"Bearer {token}", Accept="application/json") as api:
        base = f"/v1/admin/tenants/{shop.slug}/api-keys"
        created = await api.post(base, json={"name": "crm", "scopes": ["customers:read"]})
        assert created.status_code == 201, created.text
        body = created.json()
        assert (
            body["key"].startswith("sbk_")
            and body["created_by"] == admin.email
            and body["scopes"] == ["customers:read"]
        )
        assert (await api.post(base, json={"scopes": ["root"]})).status_code == 422
        listed = {c["name"]: c for c in (await api.get(base)).json()}
        assert listed["crm"]["kind"] == "key" and listed["laptop"]["kind"] == "user_token"
        assert "key" not in listed["crm"]
        assert (await api.delete(f"{base}/{body['id']}")).status_code == 204
        assert [c["active"] for c in (await api.get(base)).json() if c["name"] == "crm"] == [False]
        # revoking the token the request came with: the next request is refused
        assert (await api.delete(f"{base}/{listed['laptop']['id']}")).status_code == 204
        assert (await api.get(base)).status_code == 401
