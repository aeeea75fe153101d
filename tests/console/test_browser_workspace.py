"""The human agents' workspace in a real headless Chromium: conversations waiting for a person pinned
at the top with how long they waited, unread counts (rows, navigation, page title), the "mine",
"unassigned" and "all" views, and assigning a conversation from the inbox (the WhatsApp agent is told
on WhatsApp)."""

from __future__ import annotations

import re
from datetime import timedelta

from switchboard.console.live import publish_conversation_event
from switchboard.conversations import Actor
from switchboard.db.models import Conversation, Message, Role, utcnow
from switchboard.handoff.assignment import escalate, tenant_handoff_lock

from tests.console.test_browser import _log_in
from tests.utils.console import new_user
from tests.utils.handoff import make_agent, make_customer_conversation, reload
from tests.utils.waiting import eventually
from tests.utils.whatsapp import sent_to
from tests.utils.workers import run_worker_burst


async def _waiting(sessions, tenant, conversation_id, *, minutes: int) -> None:  # type: ignore[no-untyped-def]
    """Hand the conversation to a person with nobody online (it waits), ``minutes`` ago."""
    async with sessions() as session, session.begin():
        await tenant_handoff_lock(session, tenant.id)
        await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation_id, reason="asked for a person",
            actor=Actor.customer(None), trace_id="test-waiting",
        )  # fmt: skip
        conversation = await session.get(Conversation, conversation_id)
        conversation.queued_at = utcnow() - timedelta(minutes=minutes)


async def test_waiting_pinned_with_its_wait_and_unread_counts_in_a_browser(
    console_url, page, sessions, make_tenant, screenshot, arq_pool
):
    tenant = await make_tenant("Waiting Shop")
    _, waiting = await make_customer_conversation(
        sessions, tenant, name="Wanda Waits", texts=("I need a person", "hello?", "anyone?")
    )
    await _waiting(sessions, tenant, waiting.id, minutes=12)
    # newer activity, answered by the AI: without the pin it would be on top
    _, fresh = await make_customer_conversation(
        sessions, tenant, name="Fred Fresh", texts=("opening hours?",)
    )
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id, name="Pat Agent")

    await _log_in(page, console_url, user.email)
    await page.wait_for_url(re.compile(rf"/t/{tenant.slug}/inbox$"))
    rows = page.locator("#inbox-rows tbody tr")
    assert await rows.count() == 2
    first = rows.nth(0)
    assert "Wanda Waits" in await first.inner_text()
    wait = first.locator(".wait time")
    assert await wait.inner_text() == "12 minutes"
    assert (await wait.get_attribute("title")).startswith("Since 20")  # the exact time on hover
    assert await first.locator(".badge.count").inner_text() == "3"
    assert await rows.nth(1).locator(".badge.count").inner_text() == "1"
    assert "Fred Fresh" in await rows.nth(1).inner_text()
    # the navigation and the title count the conversations with unread messages
    badge = page.locator("#nav-unread")
    await page.wait_for_function("document.title === '(2) Inbox · Switchboard'")
    assert await badge.inner_text() == "2"
    await screenshot(page, "inbox-waiting-first")

    # opening one reads it: one conversation left unread
    await first.get_by_role("link", name=re.compile("Wanda Waits")).click()
    await page.wait_for_selector("article.msg.customer")
    await page.wait_for_function("document.title.startsWith('(1) Wanda Waits')")  # the badge leads the title
    assert await page.locator("#nav-unread").get_attribute("data-count") == "1"
    await page.goto(f"{console_url}/t/{tenant.slug}/inbox")
    await page.wait_for_selector("body[data-live=on]")
    assert await rows.nth(0).locator(".badge.count").count() == 0

    # a new customer message counts again, live: the row and the badge
    async with sessions() as session, session.begin():
        session.add(Message(tenant_id=tenant.id, conversation_id=waiting.id, channel="whatsapp",
                            direction="inbound", role="user", text="still there?"))  # fmt: skip
    await publish_conversation_event(
        arq_pool, tenant_id=tenant.id, conversation_id=waiting.id, kind="message"
    )
    await rows.nth(0).locator(".badge.count", has_text="1").wait_for()
    await page.wait_for_function("document.getElementById('nav-unread').dataset.count === '2'")

    # the views: mine (nothing yet), unassigned (both open ones), all
    await page.get_by_role("link", name="Mine").click()
    await page.wait_for_url(re.compile(r"assigned=me"))
    assert await page.locator("#inbox-rows td.empty").count() == 1
    await page.get_by_role("link", name="Unassigned").click()
    await page.wait_for_url(re.compile(r"assigned=none"))
    assert await page.locator("#inbox-rows tbody tr").count() == 2
    assert fresh.id  # the AI's conversation is nobody's: unassigned too


async def test_assign_from_the_inbox_notifies_the_agent_on_whatsapp_in_a_browser(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    agent = await make_agent(sessions, shop.tenant, "Nia Costa")
    _, waiting = await make_customer_conversation(
        sessions, shop.tenant, name="Wanda Waits", texts=("a person please",)
    )
    # on the shop's number; nobody online when it was escalated: it waits
    async with sessions() as session, session.begin():
        (await session.get(Conversation, waiting.id)).channel_account_id = shop.account.id
        stored = await session.get(type(agent), agent.id)
        stored.status = "offline"
    await _waiting(sessions, shop.tenant, waiting.id, minutes=3)
    async with sessions() as session, session.begin():
        stored = await session.get(type(agent), agent.id)
        stored.status, stored.last_inbound_at = "online", utcnow()  # she wrote lately: her window is open
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat Agent")

    await _log_in(page, console_url, user.email)
    await page.wait_for_url(re.compile(rf"/t/{shop.tenant.slug}/inbox$"))
    row = page.locator("#inbox-rows tbody tr", has_text="Wanda Waits")
    await row.get_by_label(re.compile("Assign .* to")).select_option(label="Nia Costa (WhatsApp)")
    await row.get_by_role("button", name="Assign").click()
    await page.get_by_role("status").filter(has_text="Assigned to Nia Costa.").wait_for()
    assigned = await reload(sessions, Conversation, waiting.id)
    assert (assigned.status, assigned.assigned_agent_id) == ("human", agent.id)
    await page.locator("#inbox-rows tbody tr", has_text="Nia Costa").wait_for()
    await screenshot(page, "inbox-assigned")

    await run_worker_burst(console_settings)  # the chat worker sends the agent's notice

    def to_agent() -> list[str]:
        sent = sent_to(graph_sandbox[1], shop.phone_number_id)
        return [m["text"] for m in sent if m["to"] == agent.phone]

    await eventually(lambda: len(to_agent()) == 1)
    notice = to_agent()[0]
    assert notice.startswith("Assigned to you by Pat Agent.")
    assert "Customer: Wanda Waits (+" in notice
