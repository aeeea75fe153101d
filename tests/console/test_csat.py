"""Customer satisfaction asked once when a conversation closes: from the console's Close, on WhatsApp
as reply buttons (the Graph sandbox records them), the customer's tap stored without a model turn and
thanked, and a reopened conversation closed again never asked twice."""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import select
from switchboard.db.models import Conversation, CsatAnswer, Role
from switchboard.standins.offline_server import ScriptedResponse

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
        assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "Thank you for your rating!"
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
        assert len(sent_to(graph_sandbox[1], pid)) == len(sent) + 1  # thanked once

        reopened = await me.post_form(f"{base}/reopen")
        assert reopened.status_code == 303
        assert (await me.post_form(f"{base}/close")).status_code == 303
        await run_worker_burst(console_settings)
    assert len(sent_to(graph_sandbox[1], pid)) == len(sent) + 1  # not asked again
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
