"""Every payload of tests/fixtures/payloads/instagram through the running Instagram service and worker
gives the outcome INDEX.md names; the route's own outcomes (handshake, signatures with the Instagram app's secret)."""

from __future__ import annotations

import pytest
from sqlmodel import col, select
from switchboard.channels.meta import sign_body
from switchboard.db.models import Conversation, Message
from switchboard.media import is_stored
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.instagram import PAYLOAD_CUSTOMER, encode, load_payload, mid, new_igsid
from tests.utils.whatsapp import APP_SECRET, VERIFY_TOKEN
from tests.utils.workers import run_worker_burst

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cf"
    "c0f01f0005000201f5d3a83c0000000049454e44ae426082"
)


async def _rows(sessions, tenant_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return list(
            (
                await session.exec(
                    select(Message).where(Message.tenant_id == tenant_id).order_by(col(Message.created_at))
                )
            ).all()
        )


def _with_cdn(body, url):  # type: ignore[no-untyped-def]
    """Every attachment / story URL of ``body`` pointed at ``url`` (the payloads' CDN links are fake)."""
    for entry in body["entry"]:
        for item in entry.get("messaging", []) + entry.get("standby", []):
            message = item.get("message") or {}
            for attachment in message.get("attachments", []):
                attachment["payload"]["url"] = url
            story = (message.get("reply_to") or {}).get("story")
            if story:
                story["url"] = url
    return body


EXPECTED = {
    # file: (stored, duplicates, statuses, unknown accounts)
    "text_dm.json": (1, 0, 0, []),
    "image_attachment.json": (1, 0, 0, []),
    "audio_attachment_voice.json": (1, 0, 0, []),
    "story_reply.json": (1, 0, 0, []),
    "story_mention.json": (1, 0, 0, []),
    "message_echo.json": (1, 0, 0, []),
    "reaction_react.json": (1, 0, 0, []),
    "postback_icebreaker.json": (1, 0, 0, []),
    "messaging_seen.json": (0, 0, 1, []),
    "message_deleted.json": (0, 0, 0, []),
    "quick_reply.json": (1, 0, 0, []),
    "standby_message.json": (1, 0, 0, []),
    "dashboard_test_event.json": (0, 0, 0, ["0"]),
}


async def test_every_payload_is_acknowledged_with_its_outcome(ig, sessions, stops_at_the_queue) -> None:  # type: ignore[no-untyped-def]
    url = await ig.cdn("payload-media", PNG)
    for name, expected in EXPECTED.items():
        body = _with_cdn(load_payload(name, account_id=ig.account_id), url)
        (response,) = await ig.post(body)
        assert response.status_code == 200, name
        answer = response.json()
        got = (answer["stored"], answer["duplicates"], answer["statuses"], answer["unknown_accounts"])
        assert got == expected, name
    rows = {r.external_id: r for r in await _rows(sessions, ig.tenant.id)}
    assert rows[mid(1)].raw["deleted"]["external_id"] == f"{mid(1)}:deleted"  # the unsend marked the original
    assert rows[mid(1)].inbound_state == "done" and rows[mid(1)].text == "hi, is the blue one back in stock?"
    assert (rows[mid(6)].direction, rows[mid(6)].role, rows[mid(6)].sender_external_id) == (
        "outbound",
        "human_agent",
        PAYLOAD_CUSTOMER,
    )
    assert {r.sender_external_id for r in rows.values()} == {PAYLOAD_CUSTOMER}  # never the business account
    assert rows[mid(12)].raw["normalized"]["action"] == "record"  # standby
    assert [m["expiring"] for m in rows[mid(2)].media] == [True]  # the copy job takes it from here


async def test_a_dm_is_answered_seen_and_its_media_copied_while_standby_and_mentions_are_only_recorded(
    ig, sessions
) -> None:  # type: ignore[no-untyped-def]
    ig.script.default = ScriptedResponse(content="Yes, it is back in stock!")
    url = await ig.cdn("mention-media", PNG)
    customer = new_igsid()
    bodies = [
        load_payload("text_dm.json", account_id=ig.account_id, customer=customer),
        load_payload("standby_message.json", account_id=ig.account_id, customer=customer),
        _with_cdn(load_payload("story_mention.json", account_id=ig.account_id, customer=customer), url),
    ]
    assert [r.status_code for r in await ig.post(*bodies)] == [200, 200, 200]
    await run_worker_burst(ig.settings)
    assert [(m["to"], m["text"]) for m in ig.sent()] == [(customer, "Yes, it is back in stock!")]
    assert ig.sandbox.actions_of(ig.account_id) == [
        {"account_id": ig.account_id, "to": customer, "action": "mark_seen"}
    ]
    assert len(ig.script.requests) == 1  # the standby message and the story mention never woke the agent
    rows = {r.external_id: r for r in await _rows(sessions, ig.tenant.id)}
    mention = rows[mid(5)]
    assert mention.inbound_state == "done" and is_stored(mention.media[0]["ref"])
    assert mention.media[0]["mime"] == "image/png" and mention.media[0]["size_bytes"] == len(PNG)
    async with sessions() as session:
        (conversation,) = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == ig.tenant.id))
        ).all()
    assert conversation.status == "ai"


@pytest.mark.parametrize(
    ("secret", "status"), [(None, 401), ("wrong", 403), (APP_SECRET, 403)]
)  # the WhatsApp app's secret does not sign Instagram deliveries
async def test_signatures_are_checked_with_the_instagram_app_secret(ig, sessions, secret, status) -> None:  # type: ignore[no-untyped-def]
    from tests.utils.instagram import instagram_service

    raw = encode(load_payload("text_dm.json", account_id=ig.account_id))
    headers = {"Content-Type": "application/json"}
    if secret:
        headers["X-Hub-Signature-256"] = sign_body(raw, secret)
    async with instagram_service(ig.settings) as client:
        response = await client.post("/webhooks/instagram", content=raw, headers=headers)
    assert response.status_code == status
    assert await _rows(sessions, ig.tenant.id) == []


async def test_handshake(ig) -> None:  # type: ignore[no-untyped-def]
    from tests.utils.instagram import instagram_service

    async with instagram_service(ig.settings) as client:
        ok = await client.get(
            "/webhooks/instagram",
            params={"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1158201444"},
        )
        refused = await client.get(
            "/webhooks/instagram",
            params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"},
        )
    assert (ok.status_code, ok.text, refused.status_code) == (200, "1158201444", 403)


async def test_the_customer_profile_is_asked_once_and_a_failure_never_blocks(ig, sessions) -> None:  # type: ignore[no-untyped-def]
    from switchboard.db.models import Customer

    ig.script.default = ScriptedResponse(content="Hi!")
    known, unknown = new_igsid(), new_igsid()
    ig.sandbox.profiles[known] = {"name": "Ana Lima", "username": "ana.lima"}
    for customer in (known, known, unknown):
        body = load_payload("text_dm.json", account_id=ig.account_id, customer=customer)
        body["entry"][0]["messaging"][0]["message"]["mid"] = "aWdf" + customer + str(len(ig.sent()))
        await ig.post(body)
        await run_worker_burst(ig.settings)
    ig.sandbox.profiles[known] = {"name": "Changed", "username": "changed"}  # cached: not asked again
    async with sessions() as session:
        customers = {
            c.external_user_id: c
            for c in (await session.exec(select(Customer).where(Customer.tenant_id == ig.tenant.id))).all()
        }
    assert (customers[known].display_name, customers[known].profile["username"]) == ("Ana Lima", "ana.lima")
    assert customers[unknown].display_name is None  # Meta refused: no name, and the message was answered
    assert [m["to"] for m in ig.sent()] == [known, known, unknown]
