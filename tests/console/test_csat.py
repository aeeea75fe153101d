"""Customer satisfaction asked once when a conversation closes: from the console's Close, on WhatsApp
as reply buttons (the Graph sandbox records them), the customer's tap stored without a model turn and
thanked, and a reopened conversation closed again never asked twice; the customer's next text is kept
as the rating's comment (shown on the conversation page and in analytics), only within its window."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlmodel import select
from switchboard.db.models import Conversation, CsatAnswer, Role
from switchboard.standins.offline_server import ScriptedResponse

from tests.channels.whatsapp.test_buttons import _rerun
from tests.utils.console import log_in, new_user
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst

CUSTOMER = "15550104455"


def _tap(phone_number_id: str, button_id: str, title: str) -> dict[str, Any]:
    """A reply-button tap of the customer (shape of ``interactive_button_reply.json``)."""
    body = text_body(
        phone_number_id=phone_number_id,
        wamid=f"wamid.{uuid.uuid4().hex}",
        text="x",
        wa_id=CUSTOMER,
        name="Ana Lima",
    )
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    del message["text"]
    message["type"] = "interactive"
    message["interactive"] = {"type": "button_reply", "button_reply": {"id": button_id, "title": title}}
    return body


async def _post(settings: Any, *bodies: dict[str, Any]) -> None:
    async with channel_service(settings) as svc:
        for body in bodies:
            assert (await svc.post(body)).status_code == 200
    await run_worker_burst(settings)


async def _answers(sessions: Any, tenant_id: uuid.UUID) -> list[CsatAnswer]:
    async with sessions() as session:
        return list((await session.exec(select(CsatAnswer).where(CsatAnswer.tenant_id == tenant_id))).all())


async def test_closing_in_the_console_asks_once_with_whatsapp_buttons_and_the_tap_is_stored_and_thanked(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    pid = shop.phone_number_id
    shop.script.push(ScriptedResponse(content="Your order ships today."))
    await _post(
        console_settings,
        text_body(
            phone_number_id=pid,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text="Where is my order?",
            wa_id=CUSTOMER,
            name="Ana Lima",
        ),
    )
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
        ).one()
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat")
    base = f"/t/{shop.tenant.slug}/conversations/{conversation.id}"
    async with console_client() as client:
        me = await log_in(client, user)
        assert (await me.post_form(f"{base}/close")).status_code == 303
        await run_worker_burst(console_settings)

        sent = sent_to(graph_sandbox[1], pid)
        question = sent[-1]["interactive"]
        assert question["type"] == "button"
        assert question["body"]["text"] == "How did we do? Please rate this conversation."
        buttons = [(b["reply"]["id"], b["reply"]["title"]) for b in question["action"]["buttons"]]
        assert buttons == [
            (f"csat:{conversation.id}:5", "Good"),
            (f"csat:{conversation.id}:3", "OK"),
            (f"csat:{conversation.id}:1", "Bad"),
        ]
        [asked] = await _answers(sessions, shop.tenant.id)
        assert (asked.conversation_id, asked.channel, asked.handled_by, asked.rating) == (
            conversation.id,
            "whatsapp",
            "ai",
            None,
        )

        model_calls = len(shop.script.requests)
        await _post(console_settings, _tap(pid, f"csat:{conversation.id}:5", "Good"))
        assert len(shop.script.requests) == model_calls  # the tap never reached the model
        thanks, follow_up = [m["text"] for m in sent_to(graph_sandbox[1], pid)[-2:]]
        assert (thanks, follow_up) == (
            "Thank you for your rating!",
            "Anything you'd like to add? Just write it here, or skip this.",
        )
        [answered] = await _answers(sessions, shop.tenant.id)
        assert (answered.rating, answered.answered_at is not None) == (5, True)
        async with sessions() as session:  # the tap stays in the conversation it rates
            conversations = (
                await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
            ).all()
        assert [c.id for c in conversations] == [conversation.id]

        await _post(console_settings, _tap(pid, f"csat:{conversation.id}:1", "Bad"))  # a second tap
        [still] = await _answers(sessions, shop.tenant.id)
        assert still.rating == 5
        assert len(sent_to(graph_sandbox[1], pid)) == len(sent) + 2  # thanked (and invited to comment) once

        reopened = await me.post_form(f"{base}/reopen")
        assert reopened.status_code == 303
        assert (await me.post_form(f"{base}/close")).status_code == 303
        await run_worker_burst(console_settings)
    assert len(sent_to(graph_sandbox[1], pid)) == len(sent) + 2  # not asked again
    assert len(await _answers(sessions, shop.tenant.id)) == 1


async def test_the_answer_remembers_the_person_who_had_the_conversation(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    pid = shop.phone_number_id
    shop.script.push(ScriptedResponse(content="Let me check."))
    await _post(
        console_settings,
        text_body(
            phone_number_id=pid,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text="I want a refund",
            wa_id=CUSTOMER,
            name="Ana Lima",
        ),
    )
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
        ).one()
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat")
    base = f"/t/{shop.tenant.slug}/conversations/{conversation.id}"
    async with console_client() as client:
        me = await log_in(client, user)
        assert (await me.post_form(f"{base}/takeover")).status_code == 303
        assert (await me.post_form(f"{base}/reply", {"text": "Refunded."})).status_code == 303
        assert (await me.post_form(f"{base}/close")).status_code == 303
        await run_worker_burst(console_settings)
    [asked] = await _answers(sessions, shop.tenant.id)
    assert (asked.handled_by, asked.user_id, asked.agent_id) == ("console_user", user.id, None)
    assert sent_to(graph_sandbox[1], pid)[-1]["interactive"]["body"]["text"] == (
        "How did we do? Please rate this conversation."
    )


async def _closed_and_rated(console_client, console_settings, shop, sessions, user):  # type: ignore[no-untyped-def]
    """A conversation the AI answered, closed in the console, rated Good (5) by the customer."""
    pid = shop.phone_number_id
    shop.script.push(ScriptedResponse(content="Your order ships today."))
    await _post(
        console_settings,
        text_body(phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="Order?", wa_id=CUSTOMER),
    )
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
        ).one()
    async with console_client() as client:
        me = await log_in(client, user)
        assert (
            await me.post_form(f"/t/{shop.tenant.slug}/conversations/{conversation.id}/close")
        ).status_code == 303
    await run_worker_burst(console_settings)
    await _post(console_settings, _tap(pid, f"csat:{conversation.id}:5", "Good"))
    return conversation


async def test_the_text_after_a_rating_is_its_comment_on_whatsapp_shown_on_the_page_and_in_analytics(
    console_client, console_settings, shop, sessions, graph_sandbox, arq_pool
):
    pid = shop.phone_number_id
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.tenant.id, name="Ada")
    conversation = await _closed_and_rated(console_client, console_settings, shop, sessions, admin)
    model_calls = len(shop.script.requests)

    comment = "Fast <b>and</b> kind, thanks!"
    wamid = f"wamid.{uuid.uuid4().hex}"
    await _post(console_settings, text_body(phone_number_id=pid, wamid=wamid, text=comment, wa_id=CUSTOMER))
    assert len(shop.script.requests) == model_calls  # no model turn
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "Thank you, we have passed it on."
    sent_before_rerun = len(sent_to(graph_sandbox[1], pid))
    await _rerun(console_settings, sessions, arq_pool, wamid)  # its worker died before marking it done
    assert len(sent_to(graph_sandbox[1], pid)) == sent_before_rerun  # thanked once, no AI turn
    assert len(shop.script.requests) == model_calls
    [answer] = await _answers(sessions, shop.tenant.id)
    assert (answer.rating, answer.comment) == (5, comment)
    async with sessions() as session:  # kept in the conversation it rates, no new conversation
        conversations = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
        ).all()
    assert [c.id for c in conversations] == [conversation.id]

    async with console_client() as client:
        me = await log_in(client, admin)
        page = (await client.get(f"/t/{shop.tenant.slug}/conversations/{conversation.id}")).text
        assert 'data-rating="5"' in page
        assert "Fast &lt;b&gt;and&lt;/b&gt; kind, thanks!" in page  # shown as text, never as markup
        analytics = (await client.get(f"/t/{shop.tenant.slug}/analytics?days=7")).text
        assert f'<tr data-conversation="{conversation.id}"><td>5/5</td>' in analytics
        assert "Fast &lt;b&gt;and&lt;/b&gt; kind, thanks!" in analytics
        data = (await client.get(f"/v1/admin/tenants/{shop.tenant.slug}/analytics?days=7")).json()
        assert [(c["rating"], c["comment"]) for c in data["csat_comments"]] == [(5, comment)]
        assert me is not None

    # the next text is a new conversation the AI answers
    shop.script.push(ScriptedResponse(content="We open at nine."))
    await _post(
        console_settings,
        text_body(phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="Hours?", wa_id=CUSTOMER),
    )
    assert len(shop.script.requests) == model_calls + 1
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "We open at nine."
    [still] = await _answers(sessions, shop.tenant.id)
    assert still.comment == comment


async def test_a_text_after_the_comment_window_is_a_new_conversation(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    pid = shop.phone_number_id
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.tenant.id, name="Ada")
    conversation = await _closed_and_rated(console_client, console_settings, shop, sessions, admin)
    async with sessions() as session, session.begin():  # rated 11 minutes ago: the 10-minute window passed
        [answer] = (
            await session.exec(select(CsatAnswer).where(CsatAnswer.conversation_id == conversation.id))
        ).all()
        answer.answered_at = answer.answered_at - timedelta(minutes=11)
    shop.script.push(ScriptedResponse(content="We open at nine."))
    await _post(
        console_settings,
        text_body(phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="Hours?", wa_id=CUSTOMER),
    )
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "We open at nine."
    [answer] = await _answers(sessions, shop.tenant.id)
    assert answer.comment is None
    async with sessions() as session:
        assert (
            len(
                (
                    await session.exec(select(Conversation).where(Conversation.tenant_id == shop.tenant.id))
                ).all()
            )
            == 2
        )
