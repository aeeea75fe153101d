"""Business hours edited in Agent settings as plain form rows, in a real headless Chromium."""

from __future__ import annotations

from typing import Any

from switchboard.db.models import Role, Tenant

from tests.utils.console import PASSWORD, new_user


async def _logged_in_page(browser: Any, console_url: str, user: Any) -> Any:
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(f"{console_url}/login")
    await page.fill("input[name=email]", user.email)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_load_state("networkidle")
    return page


async def _hours(sessions, tenant_id) -> dict:  # type: ignore[no-untyped-def,type-arg]
    async with sessions() as session:
        tenant = await session.get(Tenant, tenant_id)
        return dict((tenant.settings_extensions or {}).get("hours") or {})


async def test_business_hours_are_set_as_rows_and_a_refused_row_keeps_what_was_typed(
    browser, console_url, screenshot, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant(name="Hours Shop")
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/settings")
    await page.click("#advanced > summary")  # the hours are among the handoff settings under Advanced
    section = page.locator("#group-handoff")
    assert await section.locator('textarea[name^="hours."]').count() == 2  # holidays and the reply: no JSON
    rows = page.locator('[id="hours.schedule"] .row')
    assert await rows.count() == 6  # Monday to Friday and an empty row to add one
    assert await page.input_value('select[name="hours.schedule.0.day"]') == "mon"
    assert await page.input_value('input[name="hours.schedule.4.closes"]') == "18:00"

    await page.check('input[name="hours.enabled"]')
    await page.fill('input[name="hours.timezone"]', "Europe/Madrid")
    await page.select_option('select[name="hours.schedule.5.day"]', "sat")
    await page.fill('input[name="hours.schedule.5.opens"]', "14:00")
    await page.fill('input[name="hours.schedule.5.closes"]', "10:00")  # closes before it opens
    await page.fill('textarea[name="hours.holidays"]', "2026-12-25")
    await page.click("#save-settings")
    await page.wait_for_load_state("networkidle")
    assert "It closes at 10:00, not after it opens at 14:00" in await page.content()
    assert await page.input_value('input[name="hours.schedule.5.opens"]') == "14:00"  # kept as typed
    assert await page.input_value('textarea[name="hours.holidays"]') == "2026-12-25"
    assert await _hours(sessions, tenant.id) == {}

    await page.fill('input[name="hours.schedule.5.opens"]', "10:00")
    await page.fill('input[name="hours.schedule.5.closes"]', "14:00")
    await page.select_option('select[name="hours.outside_hours"]', "person")
    await page.click("#save-settings")
    await page.wait_for_load_state("networkidle")
    await screenshot(page, "settings-business-hours")
    stored = await _hours(sessions, tenant.id)
    assert stored["enabled"] is True and stored["timezone"] == "Europe/Madrid"
    assert stored["schedule"][-1] == {"day": "sat", "opens": "10:00", "closes": "14:00"}
    assert len(stored["schedule"]) == 6
    assert stored["holidays"] == ["2026-12-25"]
    assert stored["outside_hours"] == "person"
