"""Connecting a WhatsApp number from the Channels page in a real headless Chromium: the WhatsApp service
runs with its Graph sandbox, which checks the number, subscribes the app and makes the callback
handshake with the account's own verify token, as Meta does. The screenshot goes to the docs too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from switchboard.db.models import Role

from tests.console.test_browser_pages import _logged_in_page
from tests.utils.console import new_user
from tests.utils.servers import serve_app
from tests.utils.whatsapp import new_phone_number_id

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "img" / "console-channels-whatsapp.png"


async def test_connect_a_whatsapp_sandbox_number_and_see_meta_verify_the_callback(
    browser, console_url, console_settings, screenshot, sessions, make_tenant
):
    from services.whatsapp.main import create_app

    whatsapp = create_app(console_settings.model_copy(update={"whatsapp_sandbox_enabled": True}))
    tenant = await make_tenant(name="Browser Channels")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Ada")
    number, waba = new_phone_number_id(), new_phone_number_id()
    async with serve_app(whatsapp, port=console_settings.whatsapp_port):
        page: Any = await _logged_in_page(browser, console_url, admin)
        await page.goto(f"{console_url}/t/{tenant.slug}/channels")
        callback = await page.input_value("#callback-whatsapp")
        assert callback == f"http://127.0.0.1:{console_settings.whatsapp_port}/webhooks/whatsapp"
        form = "#connect-whatsapp form"
        await page.fill(f"{form} input[name=account_id]", number)
        await page.fill(f"{form} input[name=waba_id]", waba)
        await page.select_option(f"{form} select[name=api_base]", "sandbox")
        await page.click(f"{form} button[type=submit]")
        await page.wait_for_selector("#channel-notice")
        notice = await page.inner_text("#channel-notice")
        assert f"Connected: whatsapp {number}: Sandbox {number[-4:]}" in notice
        assert f"quality GREEN; app subscribed to the business account {waba}" in notice
        row = f'tr[data-account="{number}"]'
        handshake = await page.inner_text(f"{row} td.handshake")
        assert handshake != "never" and handshake.startswith("20")  # the sandbox verified the callback
        await page.click(f"{row} button[data-copy]")
        assert await page.get_attribute(f"{row} button[data-copy]", "data-copied") == "yes"
        await screenshot(page, "channels-whatsapp")
        if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):  # docs/contributing.md: refresh the docs' pictures
            DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(DOCS_IMAGE), full_page=True)
