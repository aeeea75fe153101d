"""The console in a real headless Chromium (Playwright): log in, watch a WhatsApp message arrive live in
the inbox, take over and reply (the reply reaches the Graph sandbox), hand back. Screenshots of each
main page go to ``tests/output/browser/``."""

from __future__ import annotations

import re
import uuid

from sqlmodel import select
from switchboard.db.models import Conversation, Role
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.console import PASSWORD, new_user
from tests.utils.waiting import eventually
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


async def _log_in(page, console_url: str, email: str) -> None:  # type: ignore[no-untyped-def]
    await page.goto(f"{console_url}/login")
    await page.get_by_label("E-mail").fill(email)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Log in").click()


async def test_inbox_live_takeover_reply_and_hand_back_in_a_browser(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat Agent")
    await page.goto(f"{console_url}/login")
    await screenshot(page, "login")
    await _log_in(page, console_url, user.email)
    await page.wait_for_url(re.compile(rf"/t/{shop.tenant.slug}/inbox$"))
    assert await page.locator("h1").inner_text() == "Inbox"
    await page.wait_for_selector("body[data-live=on]")  # the event stream is open
    assert await page.locator("td.empty").count() == 1

    # a customer writes on WhatsApp: the row appears without reloading the page
    shop.script.push(ScriptedResponse(content="Hi Ana! Your order A-1001 ships tomorrow."))
    async with channel_service(console_settings) as whatsapp:
        body = text_body(
            phone_number_id=shop.phone_number_id,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text="Where is my order A-1001?",
            wa_id="15550107788",
            name="Ana Lima",
        )
        assert (await whatsapp.post(body)).status_code == 200
    await run_worker_burst(console_settings)
    row = page.locator("#inbox-rows tr", has_text="Ana Lima")
    await row.wait_for()  # live, as soon as the worker resolved the conversation
    # and again when the AI's answer is written: the row shows it as the last message
    await page.locator("#inbox-rows tr", has_text="Hi Ana! Your order A-1001 ships tomorrow.").wait_for()
    await screenshot(page, "inbox")

    await row.get_by_role("link", name=re.compile("Ana Lima")).click()
    await page.wait_for_selector("article.msg.ai")
    assert "Where is my order A-1001?" in await page.locator("article.msg.customer").first.inner_text()
    await page.locator("details.turn summary").first.click()
    assert "Trace id" in await page.locator("details.turn").first.inner_text()
    await screenshot(page, "conversation")

    await page.get_by_role("button", name="Take over").click()
    await page.wait_for_selector("#mode.mode-human")
    await page.get_by_placeholder("Write to the customer").fill(
        "Hi Ana, this is Pat. I will check it myself."
    )
    await page.get_by_role("button", name="Send").click()
    await page.wait_for_selector("article.msg.human")
    await run_worker_burst(console_settings)  # the chat worker's delivery job sends it

    def replies() -> list[str]:
        return [
            m["text"] for m in sent_to(graph_sandbox[1], shop.phone_number_id) if m["to"] == "15550107788"
        ]

    await eventually(lambda: len(replies()) == 2)
    assert replies() == [
        "Hi Ana! Your order A-1001 ships tomorrow.",
        "Hi Ana, this is Pat. I will check it myself.",
    ]
    # live: the reply's delivery status moves from pending to sent without a reload
    await page.locator("article.msg.human .delivery", has_text="sent").wait_for()
    await screenshot(page, "conversation-human")

    await page.get_by_role("button", name="Hand back to the AI").click()
    await page.wait_for_selector("#mode.mode-ai")
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
        ).one()
    assert (conversation.status, conversation.assigned_user_id) == ("ai", None)


async def test_wrong_password_and_rate_limit_messages_in_a_browser(console_url, page, sessions, make_tenant):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    await page.goto(f"{console_url}/login")
    await page.get_by_label("E-mail").fill(user.email)
    await page.get_by_label("Password").fill("not the password")
    await page.get_by_role("button", name="Log in").click()
    assert await page.get_by_role("alert").inner_text() == "Wrong e-mail or password."
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    assert "/login?next=" in page.url
