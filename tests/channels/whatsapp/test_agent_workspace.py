"""The WhatsApp agent console's workspace commands end to end (webhook → worker → Graph sandbox):
``/r shortcut`` sends a canned reply with its variables filled; ``/note`` keeps a private note that
neither the customer nor the model ever reads; ``/reopen REF`` opens a closed conversation again, the AI
answering, as the console's Reopen."""

from __future__ import annotations

import pytest
from sqlmodel import col, select
from switchboard.console.inbox import conversation_view
from switchboard.conversations import Actor
from switchboard.conversations import close as close_conversation
from switchboard.db.models import CannedReply, Conversation, ConversationEvent
from switchboard.handoff import HELP_TEXT
from switchboard.standins.offline_server import ScriptedResponse

from tests.channels.whatsapp.test_handoff_relay import CUSTOMER, _agent, _escalation, _post, _text
from tests.utils.whatsapp import sent_to


@pytest.fixture
def settings_(e2e_settings):  # type: ignore[no-untyped-def]
    return e2e_settings()


async def test_r_sends_a_canned_reply_filled_for_the_customer(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    _escalation(model)
    nia = await _agent(sessions, wa_tenant, "Nia Costa")
    async with sessions() as session, session.begin():
        session.add(
            CannedReply(
                tenant_id=wa_tenant.tenant.id,
                shortcut="thanks",
                text="Thanks {customer_name}, {agent_name} here. {order} stays as typed.",
            )
        )
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "I want a person", name="Ana Lima"))
    before = len(sent_to(graph_sandbox[1], pid))

    await _post(settings_, wa_tenant, _text(wa_tenant, "/help", wa_id=nia.phone, name="Nia"))
    assert "/r shortcut - send a canned reply" in sent_to(graph_sandbox[1], pid)[before]["text"]
    assert "/r shortcut" in HELP_TEXT

    await _post(settings_, wa_tenant, _text(wa_tenant, "/R Thanks", wa_id=nia.phone, name="Nia"))
    sent = sent_to(graph_sandbox[1], pid)[before + 1 :]
    expected = "Thanks Ana Lima, Nia Costa here. {order} stays as typed."
    assert [(m["to"], m["text"]) for m in sent] == [
        (nia.phone, f"Sent to Ana Lima (+{CUSTOMER}):\n{expected}"),
        (CUSTOMER, expected),
    ]

    await _post(settings_, wa_tenant, _text(wa_tenant, "/r nope", wa_id=nia.phone, name="Nia"))
    answer = sent_to(graph_sandbox[1], pid)[-1]
    assert (answer["to"], answer["text"]) == (nia.phone, "There is no canned reply /nope. Yours: /r thanks.")


async def test_note_from_whatsapp_is_kept_never_sent_nor_read_by_the_model(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    _escalation(model)
    nia = await _agent(sessions, wa_tenant, "Nia Costa")
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "I want a person", name="Ana Lima"))
    await _post(
        settings_, wa_tenant, _text(wa_tenant, "/note VIP customer, promised 10% off", wa_id=nia.phone)
    )
    answer = sent_to(graph_sandbox[1], pid)[-1]
    assert (answer["to"], answer["text"]) == (
        nia.phone,
        f"Note kept on Ana Lima (+{CUSTOMER})'s conversation (only your team sees it).",
    )
    await _post(settings_, wa_tenant, _text(wa_tenant, "/note", wa_id=nia.phone))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"].startswith("/note needs the text to keep")
    async with sessions() as session:
        conversation = (
            await session.exec(
                select(Conversation).where(
                    Conversation.tenant_id == wa_tenant.tenant.id,
                    col(Conversation.is_agent_console).is_(False),
                )
            )
        ).one()
        view = await conversation_view(
            session, tenant_id=wa_tenant.tenant.id, conversation_id=conversation.id
        )
    [note] = [m for m in view.messages if m.kind_of_sender == "note"]
    assert (note.text, note.sender_name) == ("VIP customer, promised 10% off", "Nia Costa")

    # back to the AI: its next prompt has the conversation but not the note
    await _post(settings_, wa_tenant, _text(wa_tenant, "/end", wa_id=nia.phone))
    model.push(ScriptedResponse(content="Anything else?"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "thanks!", name="Ana Lima"))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "Anything else?"
    prompt = str(model.requests[-1]["messages"])
    assert "I want a person" in prompt and "VIP" not in prompt
    to_customer = [m["text"] for m in sent_to(graph_sandbox[1], pid) if m["to"] == CUSTOMER]
    assert not any("VIP" in text for text in to_customer)


async def test_reopen_by_its_ref_opens_a_closed_conversation_for_the_ai(
    settings_, wa_tenant, sessions, graph_sandbox, script
):  # type: ignore[no-untyped-def]
    model = await script()
    _escalation(model)
    nia = await _agent(sessions, wa_tenant, "Nia Costa")
    pid = wa_tenant.phone_number_id
    await _post(settings_, wa_tenant, _text(wa_tenant, "I want a person", name="Ana Lima"))
    notice = next(m["text"] for m in sent_to(graph_sandbox[1], pid) if m["to"] == nia.phone)
    ref = next(line for line in notice.splitlines() if line.startswith("Ref: ")).removeprefix("Ref: ")
    async with sessions() as session:
        conversation = (
            await session.exec(
                select(Conversation).where(
                    Conversation.tenant_id == wa_tenant.tenant.id,
                    col(Conversation.is_agent_console).is_(False),
                )
            )
        ).one()
    assert ref == conversation.id.hex[:8]

    await _post(settings_, wa_tenant, _text(wa_tenant, f"/reopen {ref}", wa_id=nia.phone))
    assert (
        sent_to(graph_sandbox[1], pid)[-1]["text"]
        == f"Ana Lima (+{CUSTOMER})'s conversation is open already."
    )

    await _post(settings_, wa_tenant, _text(wa_tenant, "/end", wa_id=nia.phone))
    async with sessions() as session, session.begin():
        stored = await session.get(Conversation, conversation.id)
        await close_conversation(session, stored, actor=Actor.system(), reason="test", ask_rating=False)

    await _post(settings_, wa_tenant, _text(wa_tenant, f"/REOPEN {ref.upper()}", wa_id=nia.phone))
    answer = sent_to(graph_sandbox[1], pid)[-1]
    assert (answer["to"], answer["text"]) == (
        nia.phone,
        f"Reopened Ana Lima (+{CUSTOMER})'s conversation (Ref {ref}): the AI answers their next message.",
    )
    async with sessions() as session:
        reopened = await session.get(Conversation, conversation.id)
        last = (
            await session.exec(
                select(ConversationEvent)
                .where(ConversationEvent.conversation_id == conversation.id)
                .order_by(col(ConversationEvent.created_at).desc())
            )
        ).first()
    assert (reopened.status, reopened.closed_at) == ("ai", None)
    assert (last.from_status, last.to_status, last.actor_type, last.actor_id) == (
        "closed",
        "ai",
        "agent",
        str(nia.id),
    )

    # the customer's next message is in the reopened conversation, answered by the AI
    model.push(ScriptedResponse(content="Welcome back!"))
    await _post(settings_, wa_tenant, _text(wa_tenant, "hello again", name="Ana Lima"))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"] == "Welcome back!"
    async with sessions() as session:
        customers = (
            await session.exec(
                select(Conversation).where(
                    Conversation.tenant_id == wa_tenant.tenant.id,
                    col(Conversation.is_agent_console).is_(False),
                )
            )
        ).all()
    assert [c.id for c in customers] == [conversation.id]

    # an unknown or malformed Ref is explained, and /help lists the command
    await _post(settings_, wa_tenant, _text(wa_tenant, "/reopen 00000000", wa_id=nia.phone))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"].startswith("No conversation has the Ref 00000000.")
    # eight letters and digits, as the usage says, but no conversation's: unknown, not malformed
    await _post(settings_, wa_tenant, _text(wa_tenant, "/reopen zzzz1234", wa_id=nia.phone))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"].startswith("No conversation has the Ref zzzz1234.")
    await _post(settings_, wa_tenant, _text(wa_tenant, "/reopen", wa_id=nia.phone))
    assert sent_to(graph_sandbox[1], pid)[-1]["text"].startswith("/reopen needs the conversation's Ref")
    assert "/reopen REF - open a closed conversation again" in HELP_TEXT
