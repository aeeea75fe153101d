"""Mail in, answer out: sync → stored inbound → agent → a reply in the customer's thread."""

from __future__ import annotations

from sqlmodel import col, select
from switchboard.db.models import Conversation, Message
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.gmail import deliver, new_customer, run_sync, sent_from


async def test_a_mail_is_answered_in_its_thread_with_exact_headers(scene, sessions) -> None:  # type: ignore[no-untyped-def]
    scene.script.default = ScriptedResponse(content="We will send a replacement today.")
    customer = new_customer()
    arrived = await deliver(
        scene.settings,
        scene.mailbox,
        from_=customer,
        from_name="Alex Customer",
        subject="Order #1042 arrived damaged",
        text="Hi,\n\nthe lid arrived cracked. Can you send a replacement?\n\nThanks,\nAlex",
        message_id="<orig-1@example.net>",
        headers={"References": "<older-0@example.net>"},
    )
    await run_sync(scene.settings, scene.account_id)
    (sent,) = await sent_from(scene.settings, scene.mailbox)
    assert sent["to"] == customer
    assert sent["threadId"] == arrived["threadId"] == sent["requested_thread_id"]
    headers = sent["headers"]
    assert headers["In-Reply-To"] == "<orig-1@example.net>"
    assert headers["References"] == "<older-0@example.net> <orig-1@example.net>"
    assert headers["Subject"] == "Re: Order #1042 arrived damaged"
    assert headers["From"] == scene.mailbox
    assert sent["text"] == "We will send a replacement today."
    assert "<p>We will send a replacement today.</p>" in sent["html"]
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == scene.tenant.id))
        ).one()
        rows = list(
            (
                await session.exec(
                    select(Message)
                    .where(Message.conversation_id == conversation.id)
                    .order_by(col(Message.created_at))
                )
            ).all()
        )
    assert conversation.external_thread_id == arrived["threadId"]
    assert rows[0].text.startswith("[Subject: Order #1042 arrived damaged]")
