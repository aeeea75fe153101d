"""An Instagram customer handled by a human agent who works from WhatsApp: the notice and the customer's
messages reach the agent through WhatsApp, the agent's replies reach the customer through Instagram,
with proxy metadata, under Instagram's window and HUMAN_AGENT tag rules."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import update
from sqlmodel import col, select
from switchboard.db.models import Conversation, Message, Outbox, utcnow
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.conversations import assert_human_mode_has_owner
from tests.utils.handoff import make_agent
from tests.utils.instagram import load_payload, new_igsid
from tests.utils.whatsapp import channel_service, connect_whatsapp, sent_to, text_body
from tests.utils.workers import run_workers_until_idle


def _dm(ig, customer, text):  # type: ignore[no-untyped-def]
    body = load_payload("text_dm.json", account_id=ig.account_id, customer=customer)
    body["entry"][0]["messaging"][0]["message"].update(mid="aWdf" + uuid.uuid4().hex, text=text)
    return body


async def _agent_says(settings, phone_number_id, agent, text):  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        body = text_body(
            phone_number_id=phone_number_id,
            wamid=f"wamid.{uuid.uuid4().hex}",
            text=text,
            wa_id=agent.phone,
            name=agent.name,
        )
        assert (await svc.post(body)).status_code == 200
    await run_workers_until_idle(settings)


async def test_an_instagram_customer_is_handled_by_a_whatsapp_agent(ig, sessions, graph_sandbox) -> None:  # type: ignore[no-untyped-def]
    console = await connect_whatsapp(sessions, ig.tenant, ig.settings)
    pid = console.external_account_id
    agent = await make_agent(sessions, ig.tenant, "Nia")
    async with sessions() as session, session.begin():  # the agent wrote to the business number recently
        await session.exec(
            update(type(agent)).where(col(type(agent).id) == agent.id).values(last_inbound_at=utcnow())
        )
    ig.script.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "wants a refund"}}],
        ),
        ScriptedResponse(content="A colleague will take over here."),
        ScriptedResponse(content="Customer wants a refund for a broken mug."),  # the agent's notice, after
    )
    customer = new_igsid()
    await ig.post(_dm(ig, customer, "My mug arrived broken, I want a person"))
    await run_workers_until_idle(ig.settings)
    assert [(m["to"], m["text"]) for m in ig.sent()] == [(customer, "A colleague will take over here.")]
    (notice,) = sent_to(graph_sandbox[1], pid)
    assert notice["to"] == agent.phone and f"Customer: {customer} on Instagram" in notice["text"]
    await assert_human_mode_has_owner(sessions, ig.tenant.id)
    requests = len(ig.script.requests)

    # customer (Instagram) → agent (WhatsApp)
    await ig.post(_dm(ig, customer, "hello? anyone there?"))
    await run_workers_until_idle(ig.settings)
    relayed = sent_to(graph_sandbox[1], pid)[-1]
    assert (relayed["to"], relayed["text"]) == (
        agent.phone,
        f"[{customer} on Instagram] hello? anyone there?",
    )

    # agent (WhatsApp) → customer (Instagram), within 24 hours: no tag
    await _agent_says(ig.settings, pid, agent, "Hi, I'm Nia. Sending a new mug today.")
    reply = ig.sent()[-1]
    assert (reply["to"], reply["text"], reply["tag"]) == (
        customer,
        "Hi, I'm Nia. Sending a new mug today.",
        None,
    )
    assert len(ig.script.requests) == requests  # no model call on either side

    async with sessions() as session:
        rows = list((await session.exec(select(Message).where(Message.tenant_id == ig.tenant.id))).all())
    customer_row = next(r for r in rows if r.text == "hello? anyone there?")
    assert (customer_row.channel, customer_row.proxy_metadata["relayed_to"]) == ("instagram", agent.phone)
    copy = next(r for r in rows if r.role == "human_agent" and r.text.startswith("Hi, I'm Nia"))
    assert (copy.proxy_metadata["relayed_from"], copy.proxy_metadata["relayed_to"]) == (agent.phone, customer)
    assert copy.conversation_id == customer_row.conversation_id

    # a reply longer than Instagram's limit: one outbox part (and one mid) per message; every echo is ours
    long_reply = " ".join(["We checked the warehouse and a new mug is on its way to you today."] * 40)
    before = len(ig.sent())
    await _agent_says(ig.settings, pid, agent, long_reply)
    pieces = ig.sent()[before:]
    assert len(pieces) == 3 and " ".join(m["text"] for m in pieces) == long_reply
    for piece in pieces:
        echo = load_payload("message_echo.json", account_id=ig.account_id, customer=customer)
        echo["entry"][0]["messaging"][0]["message"].update(mid=piece["id"], text=piece["text"])
        await ig.post(echo)
    await run_workers_until_idle(ig.settings)
    async with sessions() as session:
        echoed = (
            await session.exec(
                select(Outbox).where(
                    Outbox.tenant_id == ig.tenant.id,
                    Outbox.purpose == "human_reply",
                    Outbox.channel == "instagram",
                )
            )
        ).all()
        kept = (
            await session.exec(select(Message).where(col(Message.external_id).in_([m["id"] for m in pieces])))
        ).all()
    assert sorted(o.payload["echo"]["external_id"] for o in echoed if "echo" in o.payload) == sorted(
        m["id"] for m in pieces
    )
    assert kept == []

    # 30 hours after the customer's last message: the person's reply goes out with HUMAN_AGENT
    async def customer_wrote(ago: timedelta) -> None:
        async with sessions() as session, session.begin():
            await session.exec(
                update(Conversation)
                .where(Conversation.id == customer_row.conversation_id)
                .values(last_customer_message_at=utcnow() - ago)
            )

    await customer_wrote(timedelta(hours=30))
    await _agent_says(ig.settings, pid, agent, "Your new mug shipped.")
    late = ig.sent()[-1]
    assert (late["text"], late["tag"], late["messaging_type"]) == (
        "Your new mug shipped.",
        "HUMAN_AGENT",
        "MESSAGE_TAG",
    )

    # 8 days after: refused, with the reason on the part; nothing reaches Instagram
    await customer_wrote(timedelta(days=8))
    before = len(ig.sent())
    await _agent_says(ig.settings, pid, agent, "Did it arrive?")
    assert len(ig.sent()) == before
    async with sessions() as session:
        refused = (
            await session.exec(
                select(Outbox).where(
                    Outbox.tenant_id == ig.tenant.id, Outbox.channel == "instagram", Outbox.status == "failed"
                )
            )
        ).one()
    assert (refused.payload["text"], refused.error_code) == ("Did it arrive?", "window_closed")
    assert refused.error_message.startswith("more than 7 days since the customer's last message")
