"""The WhatsApp message templates of a number on the Channels page, in a real headless Chromium: listed
from the Graph sandbox with the Refresh button, a refusal said in words, and in Spanish."""

from __future__ import annotations

import random
from typing import Any

from switchboard.db.models import Role

from tests.console.test_browser_pages import _logged_in_page
from tests.utils.console import PASSWORD, new_user
from tests.utils.whatsapp import ACCESS_TOKEN, connect_whatsapp


async def test_refresh_and_read_a_number_s_templates(
    browser, console_url, console_settings, screenshot, sessions, make_tenant, graph_sandbox
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant(name="Browser Templates")
    account = await connect_whatsapp(sessions, tenant, console_settings)
    number = account.external_account_id
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Ada")
    page: Any = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/channels")
    block = f"#templates-{number}"
    await page.click(f"{block} summary")
    assert "No templates stored yet." in await page.inner_text(block)

    await page.click(f"{block} button[type=submit]")  # no business account id yet
    await page.wait_for_selector("#channel-error")
    assert (
        await page.inner_text("#channel-error")
        == "Give the WhatsApp Business Account id (digits) this number belongs to."
    )

    waba = str(random.randint(10**14, 10**15 - 1))
    await page.click(f"{block} summary")
    await page.fill(f"{block} input[name=waba_id]", waba)
    await page.click(f"{block} button[type=submit]")
    await page.wait_for_selector("#channel-notice")
    assert (
        await page.inner_text("#channel-notice")
        == f"Templates refreshed: whatsapp {number}: 5 template(s), 4 approved"
    )
    await page.click(f"{block} summary")
    rows = await page.locator(f"{block} tbody tr").all_inner_texts()
    assert [r.split("\t")[:3] for r in rows] == [
        ["hello_world", "en_US", "approved"],
        ["order_update", "en_US", "approved"],
        ["order_update", "es", "approved"],
        ["shipping_label", "en_US", "approved"],
        ["spring_sale", "en_US", "pending"],
    ]
    order = await page.inner_text(f'{block} tr[data-template="order_update:en_US"]')
    assert "Hi {{1}}, your order {{2}} is {{3}}." in order and order.rstrip().endswith("3 + 1 link(s)")
    assert await page.input_value(f"{block} input[name=waba_id]") == waba  # kept for the next refresh
    await screenshot(page, "channels-whatsapp-templates")

    graph_sandbox[1].token_errors[ACCESS_TOKEN] = 200  # the number's token lost the permission
    try:
        spanish = await browser.new_context(locale="es-ES")
        es_page = await spanish.new_page()
        await es_page.goto(f"{console_url}/login")
        await es_page.fill("input[name=email]", admin.email)
        await es_page.fill("input[name=password]", PASSWORD)
        await es_page.click("button[type=submit]")
        await es_page.goto(f"{console_url}/t/{tenant.slug}/channels")
        await es_page.click(f"{block} summary")
        assert "Plantillas de mensaje de" in await es_page.inner_text(f"{block} summary")
        await es_page.click(f"{block} button[type=submit]")
        await es_page.wait_for_selector("#channel-error")
        assert (await es_page.inner_text("#channel-error")).startswith(
            "WhatsApp no dio la lista de plantillas: "
        )
        await spanish.close()
    finally:
        graph_sandbox[1].token_errors.pop(ACCESS_TOKEN, None)
