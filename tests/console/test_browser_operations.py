"""Operations in a real headless Chromium (Playwright, ``conftest.py``): a platform admin retries a
reply the delivery loop gave up on, and it reaches the Graph sandbox once; a tenant admin connects a
WhatsApp number and a Gmail mailbox (OAuth through the Google sandbox). Screenshots go to
``tests/output/browser/``."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlmodel import select
from switchboard.db.models import ChannelAccount, Role

from tests.console.test_browser import _log_in
from tests.utils.console import new_user
from tests.utils.gmail import SECRETS, new_mailbox
from tests.utils.outbox import dead_letter_parts, new_scene, rows_of, set_row, write_parts
from tests.utils.waiting import eventually
from tests.utils.whatsapp import new_phone_number_id, sent_to
from tests.utils.workers import run_worker_burst


async def test_a_platform_admin_retries_a_dead_reply_and_it_is_sent_once(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    scene = await new_scene(sessions, shop.tenant, shop.account)
    rows = await dead_letter_parts(sessions, scene, ["Your order ships today.", "Tracking: A-1001."])
    late = await new_scene(sessions, shop.tenant, shop.account, last_message_age=timedelta(hours=30))
    (closed,) = [
        r
        for r in await write_parts(sessions, late, ["Too late."])
        if r.conversation_id == late.conversation.id
    ]
    await set_row(  # as the delivery loop leaves it (outbox/policy.may_send)
        sessions,
        closed.id,
        status="failed",
        error_code="window_closed",
        error_message="outside the 24-hour customer-service window: needs a template",
    )
    admin = await new_user(sessions, role=Role.platform_admin, tenant_id=None, name="Ops")
    await _log_in(page, console_url, admin.email)
    await page.wait_for_url(f"{console_url}/**")
    await page.goto(f"{console_url}/platform")
    await page.locator("#dead-filter select").select_option(shop.tenant.slug)  # per tenant
    await page.wait_for_url(f"**/platform?tenant={shop.tenant.slug}")
    failed = page.locator("#dead-outbox tr[data-outbox]")
    assert await failed.count() == 3
    assert "dead_letter" in await page.locator(f'tr[data-outbox="{rows[0].id}"]').inner_text()
    window_row = page.locator(f'tr[data-outbox="{closed.id}"]')
    assert await window_row.get_by_role("button", name="Retry").count() == 0  # not offered: says why
    assert await window_row.locator(".not-retryable").inner_text() == (
        "The 24-hour customer-service window had closed: a free-form reply can no longer be sent. "
        "Answer with a template, or wait for the customer to write again."
    )
    await screenshot(page, "platform-dead-letters")

    await page.locator(f'tr[data-outbox="{rows[0].id}"]').get_by_role("button", name="Retry").click()
    await page.wait_for_url(f"{console_url}/platform?flash=*")
    assert await page.locator("p.notice[role=status]").inner_text() == (
        "Requeued 2 parts of the reply: the delivery loop sends them now, in order."
    )
    assert await page.locator("#dead-filter select").input_value() == shop.tenant.slug  # filter kept
    assert await page.locator(f'tr[data-outbox="{rows[0].id}"]').count() == 0  # the whole reply left
    assert await page.locator(f'tr[data-outbox="{rows[1].id}"]').count() == 0
    assert await window_row.count() == 1
    await run_worker_burst(console_settings)  # the chat worker's deliver_outbox job sends it

    def texts() -> list[str]:
        return [
            m["text"]
            for m in sent_to(graph_sandbox[1], shop.phone_number_id)
            if m["to"] == scene.customer.phone
        ]

    await eventually(lambda: len(texts()) == 2)
    assert texts() == ["Your order ships today.", "Tracking: A-1001."]
    assert [
        (r.status, r.conversation_id == scene.conversation.id) for r in await rows_of(sessions, scene)
    ] == [
        ("sent", True),
        ("sent", True),
        ("failed", False),  # the reply outside the window stays failed
    ]
    await run_worker_burst(console_settings)
    assert len(texts()) == 2  # nothing is sent twice
    await screenshot(page, "platform-after-retry")


async def test_a_tenant_admin_connects_whatsapp_and_gmail_from_the_channels_page(
    console_url, page, sessions, make_tenant, screenshot
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id, name="Owner")
    number, mailbox, token = new_phone_number_id(), new_mailbox(), "EAAG-browser-secret"
    await _log_in(page, console_url, admin.email)
    await page.wait_for_url(f"{console_url}/t/{tenant.slug}/**")
    await page.goto(f"{console_url}/t/{tenant.slug}/channels")
    await screenshot(page, "channels-connect")

    form = page.locator("#connect-whatsapp form")
    await form.get_by_label("Phone number id (Meta)").fill(number)
    await form.get_by_label("Access token", exact=False).fill(token)
    await form.get_by_label("Display name").fill("Shop line")
    await form.get_by_label("Graph API").select_option(
        "real"
    )  # the session's Graph sandbox stands in for Meta
    async with page.expect_navigation():
        await form.get_by_role("button", name="Connect", exact=True).click()
    notice = page.locator("#channel-notice")
    assert (await notice.inner_text()).startswith(f"Connected: whatsapp {number}: Sandbox "), (
        await page.content()
    )
    assert await page.locator(f'table[data-channel="whatsapp"] tr[data-account="{number}"]').count() == 1
    assert token not in await page.content()  # write-only

    gmail = page.locator("#connect-gmail form")
    await gmail.get_by_label("Mailbox address").fill(mailbox)
    await gmail.locator("textarea[name=client_secrets]").fill(
        json.dumps({"installed": {"client_id": SECRETS.client_id, "client_secret": SECRETS.client_secret}})
    )
    await gmail.get_by_role("button", name="Connect with Google").click()  # → Google sandbox → back here
    await page.locator("#channel-notice", has_text=f"Connected: gmail {mailbox}").wait_for()
    assert f"/t/{tenant.slug}/channels/gmail/callback" in page.url
    row = page.locator(f'table[data-channel="gmail"] tr[data-account="{mailbox}"]')
    assert await row.locator("[data-token]").get_attribute("data-token") == "stored"
    await screenshot(page, "channels-connected")
    async with sessions() as session:
        accounts = (
            await session.exec(select(ChannelAccount).where(ChannelAccount.tenant_id == tenant.id))
        ).all()
    assert sorted((a.channel, a.external_account_id) for a in accounts) == [
        ("gmail", mailbox),
        ("whatsapp", number),
    ]
