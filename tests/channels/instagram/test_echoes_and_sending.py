"""Echoes (ours before and after our write, a person's in the Instagram app), the Send API's limits and
windows (a 5,000-character reply, the AI and a person past 24 hours and past 7 days), error classes."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update
from sqlmodel import col, select
from switchboard.channels.base import ChannelDeps, OutboundPart, SendErrorKind, text_length
from switchboard.channels.instagram.channel import InstagramChannel
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Conversation, Message, Outbox, OutboxPurpose, utcnow
from switchboard.outbox import OutboxItem, write_outbox
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.standins.whatsapp import ScriptedAnswer

from tests.utils.instagram import load_payload, mid, new_igsid
from tests.utils.workers import run_worker_burst


async def _conversation(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (await session.exec(select(Conversation).where(Conversation.tenant_id == tenant_id))).one()


async def _outbox(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Outbox)
                    .where(Outbox.tenant_id == tenant_id)
                    .order_by(col(Outbox.created_at), col(Outbox.part_index))
                )
            ).all()
        )


async def _messages(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Message).where(Message.tenant_id == tenant_id).order_by(col(Message.created_at))
                )
            ).all()
        )


async def _answered_dm(ig, customer, reply="Yes! The blue one is back."):  # type: ignore[no-untyped-def]
    ig.script.push(ScriptedResponse(content=reply))
    await ig.post(load_payload("text_dm.json", account_id=ig.account_id, customer=customer))
    await run_worker_burst(ig.settings)
    return ig.sent()[-1]


def _echo(ig, customer, echo_mid, text):  # type: ignore[no-untyped-def]
    body = load_payload(
        "message_echo.json", account_id=ig.account_id, customer=customer, mids={mid(6): echo_mid}
    )
    body["entry"][0]["messaging"][0]["message"]["text"] = text
    return body


async def test_an_echo_after_our_write_is_recorded_once_on_our_outbox_row(ig, sessions) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    sent = await _answered_dm(ig, customer)
    for _ in range(2):  # Meta may deliver the echo twice
        await ig.post(_echo(ig, customer, sent["id"], sent["text"]))
        await run_worker_burst(ig.settings)
    (reply,) = await _outbox(sessions, ig.tenant.id)
    assert (reply.external_id, reply.status, reply.payload["echo"]["external_id"]) == (
        sent["id"],
        "sent",
        sent["id"],
    )
    rows = await _messages(sessions, ig.tenant.id)
    assert [m.external_id for m in rows if m.external_id] == [mid(1)]  # no echo row kept
    assert [m.text for m in rows if m.role == "assistant"] == [sent["text"]]  # history shows the reply once
    assert (await _conversation(sessions, ig.tenant.id)).status == "ai"
    assert len(ig.script.requests) == 1  # an echo never wakes the agent


async def test_an_echo_before_our_write_marks_the_part_in_flight_sent(ig, sessions) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    await _answered_dm(ig, customer)
    conversation = await _conversation(sessions, ig.tenant.id)
    async with (
        sessions() as session,
        session.begin(),
    ):  # a part handed to Meta whose answer we have not recorded
        await write_outbox(
            session,
            tenant_id=ig.tenant.id,
            items=[
                OutboxItem(
                    conversation_id=conversation.id,
                    channel="instagram",
                    channel_account_id=ig.account.id,
                    recipient=customer,
                    part=OutboundPart(text="Shall I reserve one for you?"),
                )
            ],
            trace_id="t",
        )
    rows = await _outbox(sessions, ig.tenant.id)
    flying = rows[-1]
    async with sessions() as session, session.begin():
        await session.exec(
            update(Outbox)
            .where(col(Outbox.id) == flying.id)
            .values(status="sending", attempts=1, sending_at=utcnow())
        )
    echo_mid = "aWdf" + uuid.uuid4().hex
    await ig.post(_echo(ig, customer, echo_mid, "Shall I reserve one for you?"))
    await run_worker_burst(ig.settings)
    async with sessions() as session:
        row = await session.get(Outbox, flying.id)
    assert (row.status, row.external_id, row.payload["echo"]["external_id"]) == ("sent", echo_mid, echo_mid)
    assert echo_mid not in {m.external_id for m in await _messages(sessions, ig.tenant.id)}
    assert (await _conversation(sessions, ig.tenant.id)).status == "ai"
    assert len(ig.sent()) == 1  # the part in flight was not sent again


async def test_an_echo_of_a_mid_we_never_sent_is_a_person_in_the_instagram_app(ig, sessions) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    await _answered_dm(ig, customer)
    await ig.post(load_payload("message_echo.json", account_id=ig.account_id, customer=customer))
    await run_worker_burst(ig.settings)
    conversation = await _conversation(sessions, ig.tenant.id)
    assert (conversation.status, conversation.escalation_reason) == (
        "human",
        "a human replied from the Instagram app",
    )
    echo = next(m for m in await _messages(sessions, ig.tenant.id) if m.external_id == mid(6))
    assert (echo.role, echo.direction, echo.conversation_id, echo.sender_external_id) == (
        "human_agent",
        "outbound",
        conversation.id,
        customer,
    )
    assert len(ig.script.requests) == 1
    # the customer's next message goes to the person, not the AI
    await ig.post(load_payload("quick_reply.json", account_id=ig.account_id, customer=customer))
    await run_worker_burst(ig.settings)
    assert len(ig.script.requests) == 1


async def test_a_5000_character_reply_goes_out_in_parts_under_instagrams_limit(ig, sessions) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    sentence = "Our blue mugs are back in stock 😍 and ship within two days. "
    reply = (sentence * (5000 // len(sentence) + 1))[:5000].strip()
    assert len(reply) >= 4990
    await _answered_dm(ig, customer, reply=reply)
    texts = [m["text"] for m in ig.sent()]
    assert len(texts) == 6 and all(text_length(t, "utf16") <= 1000 for t in texts)
    assert " ".join(texts).split() == reply.split()  # nothing lost, nothing reordered
    parts = await _outbox(sessions, ig.tenant.id)
    assert [(p.part_index, p.status) for p in parts] == [(i, "sent") for i in range(6)]


async def _shift_last_customer_message(sessions, tenant_id, age):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        await session.exec(
            update(Conversation)
            .where(Conversation.tenant_id == tenant_id)
            .values(last_customer_message_at=utcnow() - age)
        )


@pytest.mark.parametrize(
    ("age", "purpose", "sent_tag", "error"),
    [
        (timedelta(hours=30), OutboxPurpose.human_reply, "HUMAN_AGENT", None),
        (timedelta(hours=2), OutboxPurpose.human_reply, None, None),
        (
            timedelta(days=8),
            OutboxPurpose.human_reply,
            None,
            "more than 7 days since the customer's last message: instagram accepts no reply, not even a person's, "
            "until the customer writes again",
        ),
        (
            timedelta(hours=30),
            OutboxPurpose.reply,
            None,
            "outside the 24-hour window: only a person may answer now (up to 7 days after the customer's last "
            "message)",
        ),
    ],
)
async def test_windows_a_person_may_use_the_human_agent_tag_within_7_days_the_ai_never(
    ig, sessions, age, purpose, sent_tag, error
) -> None:  # type: ignore[no-untyped-def]
    customer = new_igsid()
    await _answered_dm(ig, customer)
    await _shift_last_customer_message(sessions, ig.tenant.id, age)
    conversation = await _conversation(sessions, ig.tenant.id)
    async with sessions() as session, session.begin():
        await write_outbox(
            session,
            tenant_id=ig.tenant.id,
            items=[
                OutboxItem(
                    conversation_id=conversation.id,
                    channel="instagram",
                    channel_account_id=ig.account.id,
                    recipient=customer,
                    part=OutboundPart(text="Following up on your mug"),
                    purpose=purpose,
                )
            ],
            trace_id="t",
        )
    before = len(ig.sent())
    await run_delivery(ig, conversation.id)
    row = (await _outbox(sessions, ig.tenant.id))[-1]
    if error is None:
        (sent,) = ig.sent()[before:]
        assert (row.status, sent["text"], sent["tag"]) == ("sent", "Following up on your mug", sent_tag)
        assert sent["messaging_type"] == ("MESSAGE_TAG" if sent_tag else None)
    else:
        assert ig.sent()[before:] == []
        assert (row.status, row.error_code, row.error_message) == ("failed", "window_closed", error)


async def run_delivery(ig, conversation_id):  # type: ignore[no-untyped-def]
    """One run of the delivery loop for a conversation, as the worker's ``deliver_outbox`` job does it."""
    from arq.connections import RedisSettings, create_pool

    redis = await create_pool(RedisSettings.from_dsn(ig.settings.redis_url))
    try:
        await redis.enqueue_job(
            "deliver_outbox", conversation_id=str(conversation_id), inbound_message_id=None
        )
    finally:
        await redis.aclose()
    await run_worker_burst(ig.settings)


@pytest.mark.parametrize(
    ("code", "subcode", "http_status", "kind", "code_text"),
    [
        (10, 2018278, 400, SendErrorKind.window_closed, "10"),
        (551, 1545041, 400, SendErrorKind.permanent, "551"),
        (613, None, 400, SendErrorKind.throttled, "613"),
        (190, 463, 401, SendErrorKind.permanent, "190"),
        (2, None, 503, SendErrorKind.transient, "2"),
    ],
)
async def test_send_errors_are_classified(ig, code, subcode, http_status, kind, code_text) -> None:  # type: ignore[no-untyped-def]
    from switchboard.channels.base import SendError

    ig.sandbox.script(
        ScriptedAnswer(code=code, http_status=http_status), account_id=ig.account_id, subcode=subcode
    )
    async with httpx.AsyncClient() as http:
        channel = InstagramChannel(
            ChannelDeps(
                settings=ig.settings,
                cipher=CredentialCipher(ig.settings.secret("encryption_key").encode()),
                http=http,
            )
        )
        try:
            with pytest.raises(SendError) as raised:
                await channel.send(ig.account, new_igsid(), OutboundPart(text="hi"), correlation_id="c")
        finally:
            await channel.aclose()
    assert (raised.value.kind, raised.value.code, raised.value.http_status) == (kind, code_text, http_status)


async def test_media_goes_by_a_signed_link_to_our_copy_and_buttons_become_quick_replies(ig) -> None:  # type: ignore[no-untyped-def]
    from urllib.parse import urlsplit

    from switchboard.media import MediaStore

    from tests.utils.instagram import instagram_service

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    stored = await MediaStore.from_settings(ig.settings).put(png, namespace=f"instagram/{ig.tenant.id}")
    customer = new_igsid()
    buttons = {
        "buttons": [{"id": "RESERVE_YES", "title": "Yes, reserve it"}, {"id": "NO", "title": "No thanks"}]
    }
    async with httpx.AsyncClient() as http:
        channel = InstagramChannel(
            ChannelDeps(
                settings=ig.settings,
                cipher=CredentialCipher(ig.settings.secret("encryption_key").encode()),
                http=http,
            )
        )
        try:
            await channel.send(
                ig.account,
                customer,
                OutboundPart(type="interactive", text="Reserve one?", interactive=buttons),
                correlation_id="c1",
            )
            await channel.send(
                ig.account,
                customer,
                OutboundPart(type="media", media=({"ref": stored.ref, "mime": "image/png"},)),
                correlation_id="c2",
            )
        finally:
            await channel.aclose()
    question, image = ig.sent()[-2:]
    assert question["quick_replies"] == [
        {"content_type": "text", "title": "Yes, reserve it", "payload": "RESERVE_YES"},
        {"content_type": "text", "title": "No thanks", "payload": "NO"},
    ]
    assert image["type"] == "image" and "/media/" in image["url"] and "sig=" in image["url"]
    link = urlsplit(image["url"])
    async with instagram_service(ig.settings) as client:
        fetched = await client.get(f"{link.path}?{link.query}")
        forged = await client.get(f"{link.path}?{link.query.replace('sig=', 'sig=f')}")
    assert (fetched.status_code, fetched.content, forged.status_code) == (200, png, 403)
