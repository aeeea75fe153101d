"""Customer satisfaction on the website chat: a conversation closed after its idle time is asked once
with the widget's buttons (on the visitor's stream), the tapped button is stored and thanked, and the
visitor's next message is kept as the rating's comment without a model turn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlmodel import select
from switchboard.db.models import Conversation, CsatAnswer, Message, Tenant, utcnow
from switchboard.memory import close_idle_conversations
from switchboard.queue.jobs import Queue
from switchboard.standins.offline_server import ScriptedResponse

from tests.channels.web.test_web_channel import message, post, read_stream, web_app
from tests.utils.agent import answer_with_script
from tests.utils.web import connect_web, new_visitor
from tests.utils.workers import run_cron_job, run_worker_burst


@pytest.fixture
async def answering(make_tenant, sessions, model, offline_model):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model, name=model[1])
    return tenant


async def test_the_idle_close_asks_once_with_the_widgets_buttons_and_the_tap_is_counted(
    e2e_settings, answering, model, sessions
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="We open at nine.")
    settings = e2e_settings()
    account, _ = await connect_web(sessions, answering, settings)
    visitor = new_visitor()
    where = {"key": account.external_account_id, "visitor": visitor}
    async with web_app(settings) as url:
        await post(url, {**where, "messages": [message("When do you open?")]})
        await run_worker_burst(settings)
        async with sessions() as session, session.begin():
            conversation = (
                await session.exec(select(Conversation).where(Conversation.tenant_id == answering.id))
            ).one()
            await session.exec(
                update(Tenant)
                .where(Tenant.id == answering.id)
                .values(  # kept: the scripted model's settings
                    settings_extensions=Tenant.settings_extensions.op("||")(  # type: ignore[union-attr]
                        {"memory": {"inactivity_close_s": 60}}
                    )
                )
            )
            await session.exec(
                update(Message)
                .where(Message.conversation_id == conversation.id)
                .values(created_at=utcnow() - timedelta(minutes=5))
            )
        assert conversation.id in await close_idle_conversations(sessions, now=utcnow())
        await run_cron_job(settings, Queue.chat, "deliver_outbox_sweep")
        events = await read_stream(url, where, count=3)
        question = events[2]
        assert (question["type"], question["text"]) == (
            "reply",
            "How did we do? Please rate this conversation.",
        )
        assert question["interactive"]["kind"] == "buttons"
        assert [(o["id"], o["title"]) for o in question["interactive"]["options"]] == [
            (f"csat:{conversation.id}:5", "Good"),
            (f"csat:{conversation.id}:3", "OK"),
            (f"csat:{conversation.id}:1", "Bad"),
        ]
        calls = len(state.script(name).requests)
        await post(url, {**where, "messages": [message("Bad", payload=f"csat:{conversation.id}:1")]})
        await run_worker_burst(settings)
        events = await read_stream(url, where, count=6)
        assert (events[4]["type"], events[4]["text"]) == ("reply", "Thank you for your rating!")
        assert (events[5]["type"], events[5]["text"]) == (
            "reply",
            "Anything you'd like to add? Just write it here, or skip this.",
        )
        assert len(state.script(name).requests) == calls  # never a model turn

        # the next message is the rating's comment: kept and thanked, no model turn, no new conversation
        await post(url, {**where, "messages": [message("Nobody answered my second question.")]})
        await run_worker_burst(settings)
        events = await read_stream(url, where, count=8)
        assert (events[7]["type"], events[7]["text"]) == ("reply", "Thank you, we have passed it on.")
        assert len(state.script(name).requests) == calls
        # and the one after it is a new conversation the AI answers
        await post(url, {**where, "messages": [message("When do you close?")]})
        await run_worker_burst(settings)
        events = await read_stream(url, where, count=10)
        assert events[-1]["text"] == "We open at nine."
        assert len(state.script(name).requests) == calls + 1
    async with sessions() as session:
        [answer] = (await session.exec(select(CsatAnswer).where(CsatAnswer.tenant_id == answering.id))).all()
        conversations = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == answering.id))
        ).all()
    assert (answer.conversation_id, answer.channel, answer.handled_by, answer.rating, answer.comment) == (
        conversation.id,
        "web",
        "ai",
        1,
        "Nobody answered my second question.",
    )
    assert len(conversations) == 2
