"""A website visitor's message never goes back from "Read" to "Sent": not after a reload of the page,
and a reply the visitor read stays "read" in the console when the reloaded widget reports it delivered
again; in a real headless Chromium with the web service, the real worker and the offline model."""

from __future__ import annotations

from typing import Any

from sqlmodel import select
from switchboard.channels.web.channel import public_url
from switchboard.db.models import Message, Outbox
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import answer_with_script
from tests.utils.net import free_port
from tests.utils.servers import serve_app
from tests.utils.waiting import eventually
from tests.utils.web import connect_web, sample_site
from tests.utils.workers import run_worker_burst

WIDGET = "#switchboard-chat"


async def test_a_read_message_stays_read_after_a_reload_and_a_read_reply_stays_read(
    browser, console_settings, sessions, make_tenant, offline_model, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    from services.web.main import create_app

    settings = console_settings
    tenant = await make_tenant(name="Sol Shop")
    script = await answer_with_script(sessions, tenant.id, offline_model)
    script.push(ScriptedResponse(content="We open at nine."))
    site_port = free_port()
    account, _ = await connect_web(sessions, tenant, settings, origins=(f"http://127.0.0.1:{site_port}",))
    site = sample_site(public_url(settings), account.external_account_id, lang="en")
    context = await browser.new_context(viewport={"width": 1200, "height": 860}, locale="en-US")
    context.set_default_timeout(15_000)
    page = await context.new_page()

    async def own_state() -> Any:
        return await page.locator(f"{WIDGET} .msg.me .state").inner_text()

    async def reply_status() -> str:
        await run_worker_burst(settings)  # the chat worker applies the widget's reports
        async with sessions() as session:
            return (await session.exec(select(Outbox.status).where(Outbox.tenant_id == tenant.id))).one()

    async with (
        serve_app(create_app(settings), port=settings.web_port),
        serve_app(site, port=site_port) as site_url,
    ):
        await page.goto(site_url)
        await page.locator(f"{WIDGET} button.launcher").click()
        await page.locator(f"{WIDGET} textarea").fill("When do you open?")
        await page.locator(f"{WIDGET} textarea").press("Enter")
        await page.locator(f"{WIDGET} .msg.me .state", has_text="Sent").wait_for()

        async def stored() -> bool:
            async with sessions() as session:
                rows = await session.exec(select(Message.id).where(Message.tenant_id == tenant.id))
                return len(rows.all()) >= 1

        await eventually(stored)
        await run_worker_burst(settings)  # the AI answers; the visitor's message is marked read
        await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="We open at nine.").wait_for()
        await page.locator(f"{WIDGET} .msg.me .state", has_text="Read").wait_for()

        async def read_reported() -> bool:
            return await reply_status() == "read"

        await eventually(read_reported)

        await page.reload()
        await page.locator(f"{WIDGET} button.launcher").click()
        await page.locator(f"{WIDGET} .msg.them[data-id]", has_text="We open at nine.").wait_for()
        assert await own_state() == "Read"  # not "Sent" again
        assert await page.locator(f"{WIDGET} .msg.me").get_attribute("data-state") == "read"
        # the reloaded widget reports the reply delivered again: the console's status stays read
        await page.wait_for_timeout(600)  # the widget sends its reports in one batch after 300 ms
        assert await reply_status() == "read"
    await context.close()
