"""The e-mail rating page and the satisfaction table of Analytics in a real headless Chromium: the
link opens the answer, the customer adds an optional comment, the button records both and thanks, and
Analytics counts it for the AI with the comment next to the rating."""

from __future__ import annotations

from sqlmodel import select
from switchboard.channels.gmail.csat import rating_link
from switchboard.db.models import CsatAnswer, Role, utcnow

from tests.console.test_browser_business_hours import _logged_in_page
from tests.utils.agent import make_conversation
from tests.utils.console import new_user


async def test_a_rating_link_opens_the_answer_and_its_button_records_it_in_a_browser(
    browser, console_url, console_settings, screenshot, sessions, make_tenant
):  # type: ignore[no-untyped-def]
    tenant = await make_tenant(name="Rated Shop")
    conversation = (await make_conversation(sessions, tenant)).conversation
    async with sessions() as session, session.begin():
        session.add(
            CsatAnswer(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="gmail",
                handled_by="ai",
                asked_at=utcnow(),
            )
        )
    context = await browser.new_context(viewport={"width": 420, "height": 800}, locale="en-US")
    context.set_default_timeout(15_000)
    page = await context.new_page()
    await page.goto(rating_link(console_settings, console_url, conversation.id, 5))
    assert await page.locator("h1").inner_text() == "Rated Shop"
    assert await page.locator("#csat-page strong").inner_text() == "Good"
    await page.get_by_label("Anything you would like to add? (optional)").fill("  Quick and clear.  ")
    await screenshot(page, "csat-rating-link")
    await page.get_by_role("button", name="Send my rating").click()
    await page.wait_for_selector('#csat-page[data-state="thanked"]')
    assert await page.get_by_role("status").inner_text() == "Thank you for your rating!"
    async with sessions() as session:
        answer = (
            await session.exec(select(CsatAnswer).where(CsatAnswer.conversation_id == conversation.id))
        ).one()
    assert (answer.rating, answer.comment) == (5, "Quick and clear.")
    await context.close()

    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    page = await _logged_in_page(browser, console_url, admin)
    await page.goto(f"{console_url}/t/{tenant.slug}/analytics?days=7")
    row = page.locator('#csat tr[data-handled-by="ai"] td')
    assert await row.all_inner_texts() == ["The AI", "1", "5.00", "100%"]
    comment = page.locator(f'#csat-comments tr[data-conversation="{conversation.id}"] td')
    assert (await comment.all_inner_texts())[:3] == ["5/5", "Quick and clear.", "The AI"]
    await screenshot(page, "analytics-csat")
