"""In a real headless Chromium: from a conversation to its customer's page — identities on both channels,
conversations, memory, leads; the name and attributes edited; an export downloaded behind its expiring
link; the customer erased after their identity is typed again. An agent sees the page without export or
erase and may not post either."""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

from sqlalchemy import text
from switchboard.db.models import Role
from switchboard.media.store import MediaStore
from switchboard.queue import Queue

from tests.privacy.seed import seed_customer
from tests.utils.console import PASSWORD, log_in, new_user
from tests.utils.workers import run_worker_burst


async def _logged_in(browser: Any, console_url: str, email: str) -> Any:
    context = await browser.new_context(
        viewport={"width": 1280, "height": 900}, locale="en-US", accept_downloads=True
    )
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state()
    return page


async def test_the_customer_page_shows_edits_exports_and_erases(
    browser, console_url, console_settings, sessions, make_tenant, console_client
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    store = MediaStore.from_settings(console_settings)
    ana = await seed_customer(sessions, tenant.id, store, "ana")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    page = await _logged_in(browser, console_url, admin.email)

    await page.goto(f"{console_url}/t/{tenant.slug}/conversations/{ana.conversation_ids[0]}")
    await page.click("#customer-link")
    await page.wait_for_url(re.compile(f"/customers/{ana.customer_id}$"))
    identities = await page.inner_text("#identities")
    assert ana.phone in identities and ana.email in identities and "Gmail" in identities
    assert await page.locator("#conversations tbody tr").count() == 2
    assert "blue kettle" in await page.inner_text("#memory")
    assert "kettle" in await page.inner_text("#leads")

    await page.fill("input[name=display_name]", "Ana María")
    await page.fill("textarea[name=attributes]", "city = Sevilla\nloyalty = gold")
    await page.click("#save-attributes")
    await page.wait_for_selector("p.notice")
    assert await page.inner_text("#customer-name") == "Ana María"
    assert "loyalty = gold" in await page.input_value("textarea[name=attributes]")
    await page.fill("textarea[name=attributes]", "no equals sign here")
    await page.click("#save-attributes")
    await page.wait_for_selector("p.error")

    await page.click("#export-button")
    await page.wait_for_selector("#export-waiting")
    assert "appears here when it is ready" in await page.inner_text("p.notice")
    await run_worker_burst(console_settings, Queue.background)
    # no reload: the card asks for itself until the link is there
    await page.wait_for_selector("#download-export")
    assert await page.locator("#export-waiting").count() == 0
    link = await page.get_attribute("#download-export", "href")
    export_id = re.search(r"[?&]export=([0-9a-f]{32})", page.url).group(1)
    assert re.fullmatch(rf"/t/{tenant.slug}/customers/exports/{export_id}\.zip\?exp=\d+&sig=[^&]+", link)
    download = await page.request.get(f"{console_url}{link}")
    assert download.status == 200
    with zipfile.ZipFile(io.BytesIO(await download.body())) as archive:
        document = json.loads(archive.read("customer.json"))
    assert sorted(m["text"] for c in document["conversations"] for m in c["messages"]) == sorted(ana.texts)
    assert (await page.request.get(f"{console_url}{link.replace('sig=', 'sig=0')}")).status == 403

    agent_page = await _logged_in(browser, console_url, agent.email)
    await agent_page.goto(f"{console_url}/t/{tenant.slug}/customers/{ana.customer_id}")
    await agent_page.wait_for_selector("#identities")
    assert await agent_page.locator("#erase-form, #export").count() == 0
    async with console_client() as client:
        as_agent = await log_in(client, agent)
        refused = await as_agent.post_form(
            f"/t/{tenant.slug}/customers/{ana.customer_id}/erase", {"confirm": ana.email}
        )
        assert refused.status_code == 403

    await page.fill("#erase-form input[name=confirm]", "+34 000 000 000")
    await page.click("#erase-button")
    await page.wait_for_selector("p.error")
    await page.fill("#erase-form input[name=confirm]", "+" + ana.phone)
    await page.click("#erase-button")
    await page.wait_for_selector("p.notice[role=status]")
    assert "cannot be undone" in await page.inner_text("p.notice[role=status]")
    await run_worker_burst(console_settings, Queue.background)
    await page.reload()
    assert await page.inner_text("#customer-name") == "Erased customer"
    assert ana.phone not in await page.content()
    async with sessions() as session:
        actor = (
            await session.exec(
                text("SELECT actor FROM audit_logs WHERE action = 'customer_erased' AND target_id = :c"),
                params={"c": str(ana.customer_id)},
            )
        ).scalar_one()
    assert actor == f"console_user:{admin.id}"


async def test_an_export_that_is_neither_stored_nor_coming_says_so_and_stops_asking(
    console_client, console_settings, sessions, make_tenant
) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    ana = await seed_customer(sessions, tenant.id, MediaStore.from_settings(console_settings), "ana")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        card = await client.get(f"/t/{tenant.slug}/customers/{ana.customer_id}/exports/{'ab' * 16}")
        assert card.status_code == 200
        assert 'id="export-failed"' in card.text and "hx-trigger" not in card.text
        page = await client.get(f"/t/{tenant.slug}/customers/{ana.customer_id}?export={'ab' * 16}")
        assert 'id="export-failed"' in page.text and 'id="export-waiting"' not in page.text
        malformed = await client.get(f"/t/{tenant.slug}/customers/{ana.customer_id}/exports/nope")
        assert malformed.status_code == 404
        forged = await client.get(f"/t/{tenant.slug}/customers/exports/{'ab' * 16}.zip?exp=1&sig=x")
        assert forged.status_code == 403
