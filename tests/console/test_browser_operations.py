"""Operations in a real headless Chromium (Playwright, ``conftest.py``): a platform admin retries a
reply the delivery loop gave up on, and it reaches the Graph sandbox once. Screenshots go to
``tests/output/browser/``."""

from __future__ import annotations

from switchboard.db.models import Role

from tests.console.test_browser import _log_in
from tests.utils.console import new_user
from tests.utils.outbox import dead_letter_parts, new_scene, rows_of
from tests.utils.waiting import eventually
from tests.utils.whatsapp import sent_to
from tests.utils.workers import run_worker_burst


async def test_a_platform_admin_retries_a_dead_reply_and_it_is_sent_once(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    scene = await new_scene(sessions, shop.tenant, shop.account)
    rows = await dead_letter_parts(sessions, scene, ["Your order ships today.", "Tracking: A-1001."])
    admin = await new_user(sessions, role=Role.platform_admin, tenant_id=None, name="Ops")
    await _log_in(page, console_url, admin.email)
    await page.wait_for_url(f"{console_url}/**")
    await page.goto(f"{console_url}/platform")
    await page.locator("#dead-filter select").select_option(shop.tenant.slug)  # per tenant
    await page.wait_for_url(f"**/platform?tenant={shop.tenant.slug}")
    failed = page.locator("#dead-outbox tr[data-outbox]")
    assert await failed.count() == 2
    assert "dead_letter" in await failed.first.inner_text()
    await screenshot(page, "platform-dead-letters")

    await page.locator(f'tr[data-outbox="{rows[0].id}"]').get_by_role("button", name="Retry").click()
    await page.wait_for_url(f"{console_url}/platform")
    assert await page.locator(f'tr[data-outbox="{rows[0].id}"]').count() == 0  # the whole reply left
    assert await page.locator(f'tr[data-outbox="{rows[1].id}"]').count() == 0
    await run_worker_burst(console_settings)  # the chat worker's deliver_outbox job sends it

    def texts() -> list[str]:
        return [
            m["text"]
            for m in sent_to(graph_sandbox[1], shop.phone_number_id)
            if m["to"] == scene.customer.phone
        ]

    await eventually(lambda: len(texts()) == 2)
    assert texts() == ["Your order ships today.", "Tracking: A-1001."]
    assert [r.status for r in await rows_of(sessions, scene)] == ["sent", "sent"]
    await run_worker_burst(console_settings)
    assert len(texts()) == 2  # nothing is sent twice
    await screenshot(page, "platform-after-retry")
