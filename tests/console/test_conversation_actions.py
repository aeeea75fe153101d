"""Take over, reply, hand back, transfer and close from the console: through the conversations core,
the one outbox and the customer's channel (the Graph sandbox receives the person's reply)."""

from __future__ import annotations

import uuid

from sqlmodel import select
from switchboard.db.models import (
    Conversation,
    ConversationEvent,
    HumanAgent,
    Message,
    Outbox,
    Role,
    Turn,
    utcnow,
)
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_agent, reload
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


async def _conversation_of(sessions, tenant_id) -> Conversation:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (await session.exec(select(Conversation).where(Conversation.tenant_id == tenant_id))).one()


async def _customer_writes(settings, shop, text: str) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        body = text_body(
            phone_number_id=shop.phone_number_id,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text=text,
            wa_id="15550104455",
            name="Ana Lima",
        )
        assert (await svc.post(body)).status_code == 200
    await run_worker_burst(settings)


async def test_take_over_reply_and_hand_back_through_the_outbox_to_whatsapp(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    shop.script.push(ScriptedResponse(content="Hello Ana, the AI here."))
    await _customer_writes(console_settings, shop, "Where is my order?")
    assert [m["text"] for m in sent_to(graph_sandbox[1], shop.phone_number_id)] == ["Hello Ana, the AI here."]
    conversation = await _conversation_of(sessions, shop.tenant.id)
    agent = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat")
    async with console_client() as client:
        me = await log_in(client, agent)
        inbox = await client.get(f"/t/{shop.tenant.slug}/inbox")
        assert "Ana Lima" in inbox.text and "Hello Ana, the AI here." in inbox.text
        page = await client.get(f"/t/{shop.tenant.slug}/conversations/{conversation.id}")
        assert page.status_code == 200
        assert 'data-sender="customer"' in page.text and 'data-sender="ai"' in page.text
        async with sessions() as session:
            turn = (await session.exec(select(Turn).where(Turn.conversation_id == conversation.id))).one()
        assert (
            turn.model and turn.model in page.text and turn.trace_id in page.text
        )  # what the turn row holds
        base = f"/t/{shop.tenant.slug}/conversations/{conversation.id}"

        taken = await me.post_form(f"{base}/takeover")
        assert taken.status_code == 303
        taken_over = await reload(sessions, Conversation, conversation.id)
        assert (taken_over.status, taken_over.assigned_user_id) == ("human", agent.id)

        asked = len(shop.script.requests)
        await _customer_writes(console_settings, shop, "Are you a person?")
        assert len(shop.script.requests) == asked  # the AI stopped: no model call
        assert len(sent_to(graph_sandbox[1], shop.phone_number_id)) == 1

        replied = await me.post_form(f"{base}/reply", {"text": "Yes, I am Pat. Your order ships today."})
        assert replied.status_code == 303
        await run_worker_burst(console_settings)  # the chat worker's delivery job
        sent = sent_to(graph_sandbox[1], shop.phone_number_id)
        assert [(m["to"], m["text"]) for m in sent[1:]] == [
            ("15550104455", "Yes, I am Pat. Your order ships today.")
        ]
        async with sessions() as session:
            row = (
                await session.exec(
                    select(Outbox).where(
                        Outbox.conversation_id == conversation.id, Outbox.purpose == "human_reply"
                    )
                )
            ).one()
        assert (row.status, row.external_id) == ("sent", sent[1]["id"])
        shown = await client.get(base)
        assert 'data-sender="human"' in shown.text and "Pat" in shown.text and ">sent<" in shown.text

        back = await me.post_form(f"{base}/handback")
        assert back.status_code == 303
        handed = await reload(sessions, Conversation, conversation.id)
        assert (handed.status, handed.assigned_user_id) == ("ai", None)
    async with sessions() as session:
        events = (
            await session.exec(
                select(ConversationEvent)
                .where(ConversationEvent.conversation_id == conversation.id)
                .order_by(ConversationEvent.created_at)
            )
        ).all()
        notes = (
            await session.exec(
                select(Message.text).where(
                    Message.conversation_id == conversation.id, Message.kind == "system"
                )
            )
        ).all()
    assert [(e.to_status, e.actor_type) for e in events][-2:] == [
        ("human", "console_user"),
        ("ai", "console_user"),
    ]
    assert any("handed it back" in (n or "") for n in notes)


async def test_reply_without_taking_over_is_refused_and_nothing_is_written(
    console_client, console_settings, shop, sessions
):
    shop.script.push(ScriptedResponse(content="AI answer"))
    await _customer_writes(console_settings, shop, "hi")
    conversation = await _conversation_of(sessions, shop.tenant.id)
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=shop.tenant.id)
    async with console_client() as client:
        me = await log_in(client, user)
        answer = await me.post_form(
            f"/t/{shop.tenant.slug}/conversations/{conversation.id}/reply", {"text": "x"}
        )
        assert answer.status_code == 303 and "Take+the+conversation+over+first" in answer.headers["location"]
    async with sessions() as session:
        rows = (
            await session.exec(
                select(Outbox).where(
                    Outbox.conversation_id == conversation.id, Outbox.purpose == "human_reply"
                )
            )
        ).all()
    assert rows == []


async def test_transfer_to_a_whatsapp_agent_notifies_them_and_close_ends_it(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    shop.script.push(ScriptedResponse(content="AI answer"))
    await _customer_writes(console_settings, shop, "I want a person")
    conversation = await _conversation_of(sessions, shop.tenant.id)
    whatsapp_agent = await make_agent(sessions, shop.tenant, "Rita")
    async with (
        sessions() as session,
        session.begin(),
    ):  # Rita wrote to the business lately: her window is open
        (await session.get(HumanAgent, whatsapp_agent.id)).last_inbound_at = utcnow()
    user = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id)
    base = f"/t/{shop.tenant.slug}/conversations/{conversation.id}"
    async with console_client() as client:
        me = await log_in(client, user)
        await me.post_form(f"{base}/takeover")
        moved = await me.post_form(f"{base}/transfer", {"to": f"agent:{whatsapp_agent.id}"})
        assert moved.status_code == 303 and "Transferred" in moved.headers["location"]
        now = await reload(sessions, Conversation, conversation.id)
        assert (now.status, now.assigned_agent_id, now.assigned_user_id) == ("human", whatsapp_agent.id, None)
        await run_worker_burst(console_settings)
        to_rita = [
            m for m in sent_to(graph_sandbox[1], shop.phone_number_id) if m["to"] == whatsapp_agent.phone
        ]
        assert len(to_rita) == 1 and "Transferred to you by" in to_rita[0]["text"]
        closed = await me.post_form(f"{base}/close")
        assert closed.status_code == 303
        await run_worker_burst(console_settings)
        to_rita = [
            m for m in sent_to(graph_sandbox[1], shop.phone_number_id) if m["to"] == whatsapp_agent.phone
        ]
        assert "was closed by" in to_rita[-1]["text"]
    ended = await reload(sessions, Conversation, conversation.id)
    rita = await reload(sessions, HumanAgent, whatsapp_agent.id)
    # closed, still credited to Rita (who handled it), off her load
    assert (ended.status, ended.assigned_agent_id, rita.current_load) == ("closed", whatsapp_agent.id, 0)


async def test_thumbs_on_an_ai_answer_are_stored_with_its_turn_and_trace_and_emit_an_event(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    from switchboard.db.models import EventOutbox, Feedback

    shop.script.push(ScriptedResponse(content="Your order ships today."))
    await _customer_writes(console_settings, shop, "Where is my order?")
    conversation = await _conversation_of(sessions, shop.tenant.id)
    async with sessions() as session:
        answer = (
            await session.exec(
                select(Message).where(Message.conversation_id == conversation.id, Message.role == "assistant")
            )
        ).one()
        turn = (await session.exec(select(Turn).where(Turn.conversation_id == conversation.id))).one()
    agent = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat")
    async with console_client() as client:
        me = await log_in(client, agent)
        path = f"/t/{shop.tenant.slug}/messages/{answer.id}/feedback"
        assert (await client.post(path, data={"rating": "down"})).status_code == 403  # no CSRF token
        response = await me.post_form(path, {"rating": "down", "comment": "wrong order number"})
        assert response.status_code in (200, 303), response.text
        again = await me.post_form(path, {"rating": "up"})  # the same person changes their mind
        assert again.status_code in (200, 303), again.text
    async with sessions() as session:
        rows = (await session.exec(select(Feedback).where(Feedback.message_id == answer.id))).all()
        events = (
            await session.exec(
                select(EventOutbox).where(
                    EventOutbox.tenant_id == shop.tenant.id, EventOutbox.event_type == "feedback.created"
                )
            )
        ).all()
    assert [(r.rating, r.comment, r.turn_id, r.trace_id) for r in rows] == [
        ("up", None, turn.id, turn.trace_id)
    ]
    assert rows[0].source == f"console_user:{agent.id}"
    assert [e.payload["data"]["rating"] for e in events] == ["down", "up"]


async def test_hand_back_answers_what_the_customer_wrote_meanwhile_and_the_note_is_no_ones_message(
    console_client, console_settings, shop, sessions, graph_sandbox
):
    shop.script.push(ScriptedResponse(content="Hi, the AI here."))
    await _customer_writes(console_settings, shop, "hello")
    conversation = await _conversation_of(sessions, shop.tenant.id)
    agent = await new_user(sessions, role=Role.agent, tenant_id=shop.tenant.id, name="Pat")
    base = f"/t/{shop.tenant.slug}/conversations/{conversation.id}"
    async with console_client() as client:
        me = await log_in(client, agent)
        assert (await me.post_form(f"{base}/takeover")).status_code == 303
        await _customer_writes(console_settings, shop, "Do you ship to Porto?")
        asked = len(shop.script.requests)
        shop.script.push(ScriptedResponse(content="Yes, we ship to Porto."))
        assert (await me.post_form(f"{base}/handback")).status_code == 303
        await run_worker_burst(console_settings)
        assert len(shop.script.requests) == asked + 1
        assert shop.script.requests[-1]["messages"][-1] == {
            "role": "user",
            "content": "Do you ship to Porto?",
        }
        sent = [m["text"] for m in sent_to(graph_sandbox[1], shop.phone_number_id)]
        assert sent == ["Hi, the AI here.", "Yes, we ship to Porto."]

        # a person's reply, then a hand-back with nothing waiting: no turn, and the inbox row shows the
        # person's reply, never the note left for the AI
        assert (await me.post_form(f"{base}/takeover")).status_code == 303
        assert (await me.post_form(f"{base}/reply", {"text": "Pat here: anything else?"})).status_code == 303
        assert (await me.post_form(f"{base}/handback")).status_code == 303
        await run_worker_burst(console_settings)
        assert len(shop.script.requests) == asked + 1
        inbox = await client.get(f"/t/{shop.tenant.slug}/inbox")
        assert "Pat here: anything else?" in inbox.text and "handed it back" not in inbox.text
