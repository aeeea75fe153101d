"""In a real headless Chromium: a platform admin creates a tenant with its first admin's invitation;
the admin opens the link, chooses a password, sees the setup checklist, invites an agent; the agent
accepts and lands on the inbox. Screenshots of the checklist and the People page go to the docs."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from switchboard.db.models import Role

from tests.utils.console import PASSWORD, new_user

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
"""Where the documentation's screenshots live (the console page shows them)."""


async def _new_page(browser: Any) -> Any:
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    context.set_default_timeout(15_000)
    return await context.new_page()


async def _accept_invitation(page: Any, link: str, password: str, lands_on: str) -> None:
    """Open the link, choose the password, and wait until the browser is on ``lands_on`` (a path)."""
    await page.goto(link)
    await page.fill("input[name=password]", password)
    await page.fill("input[name=password_again]", password)
    await page.click("button[type=submit]")
    await page.wait_for_url(re.compile(re.escape(lands_on) + "$"))


async def test_a_new_business_gets_its_admin_and_agent_from_the_browser(
    browser, console_url, screenshot, sessions
):
    platform = await new_user(sessions, role=Role.platform_admin, tenant_id=None)
    slug = f"corner-{uuid.uuid4().hex[:6]}"
    owner_email = f"owner-{uuid.uuid4().hex[:6]}@example.com"
    agent_email = f"pat-{uuid.uuid4().hex[:6]}@example.com"

    admin_page = await _new_page(browser)
    await admin_page.goto(f"{console_url}/login")
    await admin_page.fill("input[name=email]", platform.email)
    await admin_page.fill("input[name=password]", PASSWORD)
    await admin_page.click("button[type=submit]")
    await admin_page.goto(f"{console_url}/platform")
    await admin_page.fill("input[name=slug]", slug)
    await admin_page.fill("input[name=name]", "Corner Bakery")
    await admin_page.fill("input[name=admin_email]", owner_email)
    await admin_page.fill("input[name=admin_name]", "Olga")
    await admin_page.click("text=Create tenant")
    await admin_page.wait_for_selector(f'tr[data-tenant="{slug}"]')
    owner_link = await admin_page.input_value("#invite-link")
    assert owner_link.startswith(f"{console_url}/invite/")

    owner = await _new_page(browser)
    await _accept_invitation(owner, owner_link, "crusty loaf at dawn", f"/t/{slug}/home")
    await owner.wait_for_selector('#checklist li[data-step="channel"][data-done="no"]')
    steps = await owner.eval_on_selector_all("#checklist li", "els => els.map(e => e.dataset.step)")
    assert steps == ["channel", "model", "knowledge", "people", "test"]
    shots = {"checklist": await screenshot(owner, "checklist")}

    await owner.click('#checklist li[data-step="people"] a')
    await owner.wait_for_selector("#invite-form")
    await owner.fill("#invite-form input[name=email]", agent_email)
    await owner.fill("#invite-form input[name=name]", "Pat")
    await owner.select_option("#invite-form select[name=role]", "agent")
    await owner.click("#invite-form button[type=submit]")
    await owner.wait_for_selector(f'tr[data-invite="{agent_email}"]')
    agent_link = await owner.input_value("#invite-link")
    await owner.fill("#agent-form input[name=name]", "Nia Costa")
    await owner.fill("#agent-form input[name=phone]", "+1 555 010 2030")
    await owner.click("#agent-form button[type=submit]")
    await owner.wait_for_selector('tr[data-agent="Nia Costa"]')
    shots["people"] = await screenshot(owner, "people")

    agent = await _new_page(browser)
    await _accept_invitation(agent, agent_link, "sourdough every morning", f"/t/{slug}/inbox")
    await agent.wait_for_selector("table.inbox")
    nav = await agent.inner_text("header nav")
    assert "People" not in nav and "Platform" not in nav

    await owner.goto(f"{console_url}/t/{slug}/people")
    await owner.wait_for_selector(f'tr[data-user="{agent_email}"]')
    assert await owner.query_selector(f'tr[data-invite="{agent_email}"]') is None

    for open_page in (admin_page, owner, agent):  # the inbox's live stream ends with its page
        await open_page.context.close()
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):  # docs/contributing.md: refresh the docs' pictures
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name, path in shots.items():
            shutil.copyfile(path, DOCS_IMG / f"console-{name}.png")
