"""The human agents' workspace in a real headless Chromium: conversations waiting for a person pinned
at the top with how long they waited, unread counts (rows, navigation, page title), the "mine",
"unassigned" and "all" views, and assigning a conversation from the inbox (the WhatsApp agent is told
on WhatsApp)."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from sqlmodel import select
from switchboard.conversations import Actor, start_conversation
from switchboard.db.models import Conversation, Message, Outbox, Role, Tenant, utcnow
from switchboard.handoff.assignment import escalate, tenant_handoff_lock
from switchboard.live_updates import publish_conversation_event
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import set_section

from tests.console.test_browser import _log_in
from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_agent, make_customer_conversation, reload
from tests.utils.waiting import eventually
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


async def _waiting(sessions, tenant, conversation_id, *, minutes: int) -> None:  # type: ignore[no-untyped-def]
    """Hand the conversation to a person with nobody online (it waits), ``minutes`` ago."""
    async with sessions() as session, session.begin():
        await tenant_handoff_lock(session, tenant.id)
        await escalate(
            session,
            tenant_id=tenant.id,
            conversation_id=conversation_id,
            reason="asked for a person",
            actor=Actor.customer(None),
            trace_id="test-waiting",
        )
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
        session.add(
            Message(
                tenant_id=tenant.id,
                conversation_id=waiting.id,
                channel="whatsapp",
                direction="inbound",
                role="user",
                text="still there?",
            )
        )
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


async def test_canned_reply_managed_inserted_with_slash_and_sent_in_a_browser(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    customer, conversation = await make_customer_conversation(
        sessions, shop.tenant, name="Ana Lima", texts=("hi",)
    )
    async with sessions() as session, session.begin():
        stored = await session.get(Conversation, conversation.id)
        stored.channel_account_id, stored.last_customer_message_at = shop.account.id, utcnow()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.tenant.id, name="Pat Admin")
    await _log_in(page, console_url, admin.email)
    await page.goto(f"{console_url}/t/{shop.tenant.slug}/canned")
    new = page.locator("#new-canned")
    await new.get_by_label("Shortcut").fill("thanks")
    await new.get_by_label("Text").fill("Thank you, {customer_name}! {agent_name} here, happy to help.")
    await new.get_by_role("button", name="Add canned reply").click()
    await page.get_by_role("status").filter(has_text="Saved /thanks.").wait_for()
    await new.get_by_label("Shortcut").fill("/Refund")
    await new.get_by_label("Text").fill("Refunds take 5 days.")
    await new.get_by_role("button", name="Add canned reply").click()
    await page.get_by_role("status").filter(has_text="Saved /refund.").wait_for()
    await new.get_by_label("Shortcut").fill("thanks")  # taken: refused, said in words
    await new.get_by_label("Text").fill("again")
    await new.get_by_role("button", name="Add canned reply").click()
    assert "/thanks is taken" in await page.get_by_role("alert").inner_text()
    await screenshot(page, "canned-replies")

    await page.goto(f"{console_url}/t/{shop.tenant.slug}/conversations/{conversation.id}")
    await page.get_by_role("button", name="Take over").click()
    box = page.get_by_role("combobox", name="Reply")
    await box.wait_for()
    await box.press_sequentially("/")
    options = page.get_by_role("listbox", name="Canned replies").get_by_role("option")
    assert await options.count() == 2  # both shortcuts
    await box.press_sequentially("th")
    assert await options.count() == 1
    assert await box.get_attribute("aria-expanded") == "true"
    await screenshot(page, "canned-picker")
    await box.press("Enter")  # the keyboard inserts it
    expected = "Thank you, Ana Lima! Pat Admin here, happy to help."
    assert await box.input_value() == expected
    assert await box.get_attribute("aria-expanded") == "false"
    await page.get_by_role("button", name="Send").click()
    await page.locator("article.msg.human", has_text=expected).wait_for()
    await run_worker_burst(console_settings)
    to_customer = [
        m["text"] for m in sent_to(graph_sandbox[1], shop.phone_number_id) if m["to"] == customer.phone
    ]
    assert to_customer == [expected]


async def test_private_note_in_the_thread_never_sent_nor_in_the_prompt_in_a_browser(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat Agent")
    shop.script.push(ScriptedResponse(content="Your order ships tomorrow."))
    async with channel_service(console_settings) as whatsapp:
        body = text_body(
            phone_number_id=shop.phone_number_id,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text="Where is my order?",
            wa_id="15550107711",
            name="Ana Lima",
        )
        assert (await whatsapp.post(body)).status_code == 200
    await run_worker_burst(console_settings)
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
        ).one()

    await _log_in(page, console_url, user.email)
    await page.goto(f"{console_url}/t/{shop.tenant.slug}/conversations/{conversation.id}")
    await page.get_by_text("Add a private note").click()
    await page.get_by_label("Private note").fill("Gold customer: offer free shipping")
    await page.get_by_role("button", name="Keep note").click()
    note = page.locator("article.msg.note")
    await note.wait_for()
    assert "Private note by Pat Agent" in await note.inner_text()
    assert "Gold customer: offer free shipping" in await note.inner_text()
    assert (
        await note.evaluate("e => getComputedStyle(e).borderTopStyle") == "dashed"
    )  # distinct from messages
    await screenshot(page, "conversation-note")

    shop.script.push(ScriptedResponse(content="Anything else?"))
    async with channel_service(console_settings) as whatsapp:
        body = text_body(
            phone_number_id=shop.phone_number_id,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text="thanks",
            wa_id="15550107711",
            name="Ana Lima",
        )
        assert (await whatsapp.post(body)).status_code == 200
    await run_worker_burst(console_settings)
    sent = [m["text"] for m in sent_to(graph_sandbox[1], shop.phone_number_id) if m["to"] == "15550107711"]
    assert sent == ["Your order ships tomorrow.", "Anything else?"]
    prompt = str(shop.script.requests[-1]["messages"])
    assert "Where is my order?" in prompt and "Gold customer" not in prompt
    async with sessions() as session:
        outbox = (await session.exec(select(Outbox).where(Outbox.tenant_id == shop.tenant.id))).all()
    assert not any("Gold customer" in (row.payload.get("text") or "") for row in outbox)


async def test_close_with_farewell_reopen_and_history_in_words_in_a_browser(
    console_url, page, console_settings, shop, sessions, graph_sandbox, screenshot
):
    customer, conversation = await make_customer_conversation(
        sessions, shop.tenant, name="Ana Lima", texts=("hi",)
    )
    async with sessions() as session, session.begin():
        stored = await session.get(Conversation, conversation.id)
        stored.channel_account_id, stored.last_customer_message_at = shop.account.id, utcnow()
        tenant = await session.get(Tenant, shop.tenant.id)
        set_section(tenant, "handoff", farewell="Thanks for writing to us! Write again whenever you need us.")
        session.add(tenant)
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat Agent")
    await _log_in(page, console_url, user.email)
    await page.goto(f"{console_url}/t/{shop.tenant.slug}/conversations/{conversation.id}")
    await page.get_by_role("button", name="Take over").click()
    await page.wait_for_selector("#mode.mode-human")

    # the reply box sits under the thread, in the main column, not in the sidebar
    thread = await page.locator("section.thread").bounding_box()
    box = await page.locator("#reply-box").bounding_box()
    side = await page.locator("aside.side").bounding_box()
    assert box["y"] >= thread["y"] + thread["height"] and box["x"] < side["x"]
    # relative times, the exact time on hover, never wrapped
    stamp = page.locator("article.msg.customer time").first
    assert re.fullmatch(r"\d+ seconds? ago", await stamp.inner_text())
    assert (await stamp.get_attribute("title")).endswith(" UTC")
    assert await stamp.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"

    assert "The customer gets your farewell" in await page.locator("aside.side").inner_text()
    await page.get_by_role("button", name="Close").click()
    await page.wait_for_selector("#mode.mode-closed")
    await page.locator("article.msg", has_text="Thanks for writing to us!").wait_for()
    await run_worker_burst(console_settings)
    to_customer = [
        m["text"] or m["interactive"]["body"]["text"]
        for m in sent_to(graph_sandbox[1], shop.phone_number_id)
        if m["to"] == customer.phone
    ]
    assert to_customer == [  # the farewell, then the satisfaction question
        "Thanks for writing to us! Write again whenever you need us.",
        "How did we do? Please rate this conversation.",
    ]

    await page.get_by_role("button", name="Reopen").click()
    await page.wait_for_selector("#mode.mode-ai")
    assert (await reload(sessions, Conversation, conversation.id)).status == "ai"
    history = [line.strip() for line in (await page.locator("ul.history").inner_text()).splitlines()]
    words = [re.sub(r" \S+ seconds? ago$", "", line) for line in history]
    assert words == [
        "Conversation started",
        "Pat Agent took over",
        "Closed by Pat Agent",
        "Reopened by Pat Agent",
    ]
    assert "→" not in await page.locator("ul.history").inner_text()
    await screenshot(page, "conversation-reopened")


async def test_reopen_is_refused_when_the_customer_has_a_newer_conversation(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    customer, old = await make_customer_conversation(sessions, tenant, name="Ana Lima", texts=("hi",))
    async with sessions() as session, session.begin():
        stored = await session.get(Conversation, old.id)
        stored.status, stored.closed_at = "closed", utcnow()
        stored_customer = await session.get(type(customer), customer.id)
        await start_conversation(session, customer=stored_customer, channel_account_id=None)
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, user)
        answer = await me.post_form(f"/t/{tenant.slug}/conversations/{old.id}/reopen")
    assert answer.status_code == 303 and "newer+open+conversation" in answer.headers["location"]
    assert (await reload(sessions, Conversation, old.id)).status == "closed"
