"""Handoff of a Gmail thread: the WhatsApp agent receives the mail's text, their reply goes out as an
e-mail in the customer's thread (real sync, workers, WhatsApp service and both sandboxes)."""

from __future__ import annotations

import base64
import uuid

from sqlmodel import select
from switchboard.conversations.lifecycle import Actor
from switchboard.db.models import Conversation, HumanAgent, utcnow
from switchboard.handoff import escalate_and_notify
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.gmail import deliver, new_customer, run_sync, sent_from
from tests.utils.handoff import make_agent
from tests.utils.whatsapp import channel_service, connect_whatsapp, sent_to, text_body
from tests.utils.workers import run_worker_burst


async def test_a_whatsapp_agent_answers_a_mail_thread(scene, sessions, graph_sandbox) -> None:  # type: ignore[no-untyped-def]
    scene.script.default = ScriptedResponse(content="Let me check.")
    number = await connect_whatsapp(sessions, scene.tenant, scene.settings)
    agent = await make_agent(sessions, scene.tenant, "Rita")
    async with sessions() as session, session.begin():  # Rita wrote to the number today: her window is open
        stored = await session.get(HumanAgent, agent.id)
        stored.last_inbound_at = utcnow()
        session.add(stored)
    customer = new_customer()
    first = await deliver(
        scene.settings,
        scene.mailbox,
        from_=customer,
        subject="Broken lid",
        text="The lid arrived cracked.",
        message_id="<c1@example.net>",
    )
    await run_sync(scene.settings, scene.account_id)
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == scene.tenant.id))
        ).one()
    await escalate_and_notify(
        sessions,
        None,
        tenant_id=scene.tenant.id,
        conversation_id=conversation.id,
        reason="customer wants a person",
        trace_id="t-handoff",
        actor=Actor.ai(),
    )
    await run_worker_burst(scene.settings)  # the agent's notice goes out on WhatsApp

    await deliver(
        scene.settings,
        scene.mailbox,
        from_=customer,
        subject="Re: Broken lid",
        text="Can I get a new one by Friday?",
        thread_id=first["threadId"],
        message_id="<c2@example.net>",
        headers={"References": "<c1@example.net>"},
        attachments=[
            {
                "filename": "photo-note.txt",
                "mime": "text/plain",
                "data_b64": base64.b64encode(b"crack on the left side").decode(),
            }
        ],
    )
    await run_sync(scene.settings, scene.account_id)
    to_agent = [m for m in sent_to(graph_sandbox[1], number.external_account_id) if m["to"] == agent.phone]
    assert "Can I get a new one by Friday?" in to_agent[-1]["text"]
    # the attachment reaches the agent as its line of the mail's text, never as a (Gmail) media id on WhatsApp
    assert '[Attachment photo-note.txt]: "crack on the left side"' in to_agent[-1]["text"]
    assert {m["type"] for m in to_agent} == {"text"}
    assert len(scene.script.requests) == 1  # no model in human mode

    async with channel_service(scene.settings) as wa:
        reply = text_body(
            phone_number_id=number.external_account_id,
            wamid=f"wamid.AG{uuid.uuid4().hex}",
            text="Yes, a new lid ships tomorrow.",
            wa_id=agent.phone.lstrip("+"),
            name="Rita",
        )
        assert (await wa.post(reply)).status_code == 200
    await run_worker_burst(scene.settings)
    mails = await sent_from(scene.settings, scene.mailbox)
    assert [m["text"] for m in mails] == ["Let me check.", "Yes, a new lid ships tomorrow."]
    human = mails[-1]
    assert (human["to"], human["threadId"]) == (customer, first["threadId"])
    assert human["headers"]["In-Reply-To"] == "<c2@example.net>"
    assert human["headers"]["Subject"] == "Re: Broken lid"
    assert "Auto-Submitted" not in human["headers"]  # a person wrote it
