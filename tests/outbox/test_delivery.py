"""The delivery loop: parts in order and once, transient errors, back-off, dead letter, read receipts, logs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from switchboard.channels.base import OutboundPart
from switchboard.db.models import Outbox, OutboxPurpose, utcnow
from switchboard.outbox import OutboxItem, write_outbox
from switchboard.outbox.delivery import DeliveryReport, DeliveryScope, deliver
from switchboard.outbox.policy import backoff_s

from tests.utils.outbox import (
    captured_logs,
    make_human_agent,
    past,
    rows_of,
    script,
    sent_by,
    set_row,
    write_agent_notice,
    write_parts,
)

TEXTS = ["part one", "part two", "part three"]


async def test_parts_go_out_in_order_once_and_a_rerun_sends_nothing(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    rows = await write_parts(sessions, scene, TEXTS)

    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))
    again = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    sent = await sent_by(sandbox[0], scene.phone_number_id)
    assert [(m["to"], m["text"]) for m in sent] == [(scene.customer.phone, t) for t in TEXTS]
    assert [m["biz_opaque_callback_data"] for m in sent] == [r.correlation_id for r in rows]
    assert report == DeliveryReport(sent=3, failed=0, pending=0, retry_in_s=None)
    assert again == DeliveryReport(sent=0, failed=0, pending=0, retry_in_s=None)
    after = await rows_of(sessions, scene)
    assert [(r.status, r.attempts, r.external_id, r.error_code) for r in after] == [
        ("sent", 1, m["id"], None) for m in sent
    ]
    assert all(r.sent_at is not None and r.sending_at is not None for r in after)


async def test_two_loops_at_once_send_each_part_once_in_order(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    await write_parts(sessions, scene, [f"part {i}" for i in range(6)])

    reports = await asyncio.gather(
        *(deliver(deps, DeliveryScope(tenant_id=scene.tenant.id)) for _ in range(3))
    )
    while (await deliver(deps, DeliveryScope(tenant_id=scene.tenant.id))).sent:  # what a blocked loop left
        pass

    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == [
        f"part {i}" for i in range(6)
    ]
    assert sum(r.sent for r in reports) <= 6
    assert [r.status for r in await rows_of(sessions, scene)] == ["sent"] * 6


async def test_transient_failure_of_part_two_keeps_part_one_and_holds_part_three(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    rows = await write_parts(sessions, scene, TEXTS)
    scope = DeliveryScope(inbound_message_id=scene.inbound.id)

    first = await deliver(deps, scope, limit=1)  # part one only
    await script(sandbox[0], phone_number_id=scene.phone_number_id, code=131000, http_status=500)
    before = utcnow()
    second = await deliver(deps, scope)
    after = utcnow()

    assert first.sent == 1
    part1, part2, part3 = await rows_of(sessions, scene)
    assert (part1.status, part1.attempts) == ("sent", 1)
    assert (part2.status, part2.attempts, part2.error_code) == ("pending", 1, "131000")
    assert before <= part2.next_attempt_at <= after + timedelta(seconds=deps.settings.delivery_backoff_base_s)
    assert (part3.status, part3.attempts, part3.next_attempt_at) == ("pending", 0, None)
    assert (second.sent, second.failed, second.pending) == (0, 0, 2)
    assert 0 <= second.retry_in_s <= deps.settings.delivery_backoff_base_s
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == ["part one"]

    # not due yet: nothing is tried; once due, part two then part three, part one never again
    await set_row(sessions, rows[1].id, next_attempt_at=utcnow() + timedelta(seconds=60))
    waiting = await deliver(deps, scope)
    assert (waiting.sent, waiting.pending) == (0, 2) and 59 <= waiting.retry_in_s <= 60
    await set_row(sessions, rows[1].id, next_attempt_at=past(1))
    third = await deliver(deps, scope)
    assert third == DeliveryReport(sent=2, failed=0, pending=0, retry_in_s=None)
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == TEXTS
    assert [(r.status, r.attempts) for r in await rows_of(sessions, scene)] == [
        ("sent", 1),
        ("sent", 2),
        ("sent", 1),
    ]


def test_backoff_is_capped_exponential_with_full_jitter() -> None:
    caps = [backoff_s(n, base_s=2, max_s=300, rng=lambda: 0.999999) for n in range(1, 11)]
    assert [round(c) for c in caps] == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert backoff_s(5, base_s=2, max_s=300, rng=lambda: 0.0) == 0.0
    assert backoff_s(3, base_s=2, max_s=300, rng=lambda: 0.5) == 4.0


async def test_backoff_grows_per_attempt_then_dead_letter(make_deps, make_scene, sessions, sandbox) -> None:  # type: ignore[no-untyped-def]
    deps = make_deps(delivery_max_attempts=4, delivery_backoff_base_s=10, delivery_backoff_max_s=25)
    scene = await make_scene()
    rows = await write_parts(sessions, scene, ["only part", "second part"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, code=131000, http_status=500, times=4)
    scope = DeliveryScope(inbound_message_id=scene.inbound.id)

    for attempt in range(1, 4):
        before = utcnow()
        report = await deliver(deps, scope)
        after = utcnow()
        row = (await rows_of(sessions, scene))[0]
        cap_s = min(25, 10 * 2 ** (attempt - 1))
        assert (row.status, row.attempts) == ("pending", attempt)
        assert before <= row.next_attempt_at <= after + timedelta(seconds=cap_s)
        assert (report.sent, report.failed, report.pending) == (0, 0, 2)
        await set_row(sessions, rows[0].id, next_attempt_at=past(1))
    with captured_logs() as logs:
        last = await deliver(deps, scope)

    assert last == DeliveryReport(sent=0, failed=2, pending=0, retry_in_s=None)
    first, second = await rows_of(sessions, scene)
    assert (first.status, first.error_code, first.attempts) == ("failed", "dead_letter", 4)
    assert first.error_message.startswith("gave up after 4 attempts: (#131000) Something went wrong")
    assert (second.status, second.error_code, second.attempts) == ("failed", "dead_letter", 0)
    assert second.error_message.startswith("not sent: part 0 failed: gave up after 4 attempts")
    dead = [e for e in logs if e["event"] == "delivery_dead_letter"]
    assert [
        (e["log_level"], e["tenant_id"], e["conversation_id"], e["trace_id"], e["outbox_id"]) for e in dead
    ] == [("error", str(scene.tenant.id), str(scene.conversation.id), first.trace_id, str(first.id))]
    assert await sent_by(sandbox[0], scene.phone_number_id) == []


async def test_retry_after_is_a_lower_bound_of_the_backoff(make_deps, make_scene, sessions, sandbox) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    await write_parts(sessions, scene, ["hi"])
    await script(
        sandbox[0],
        phone_number_id=scene.phone_number_id,
        code=131000,
        http_status=503,
        headers={"Retry-After": "40"},
    )
    before = utcnow()
    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    (row,) = await rows_of(sessions, scene)
    assert row.status == "pending" and before + timedelta(seconds=40) <= row.next_attempt_at
    assert row.next_attempt_at <= utcnow() + timedelta(seconds=40)
    assert 39 <= report.retry_in_s <= 40


async def test_first_reply_part_marks_the_customer_message_read_once(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    await write_parts(sessions, scene, ["a", "b"])
    await write_parts(sessions, scene, ["not a reply"], purpose=OutboxPurpose.notice)
    replies = DeliveryScope(inbound_message_id=scene.inbound.id, purposes=frozenset({OutboxPurpose.reply}))

    await deliver(deps, replies)
    assert sandbox[1].read_marks.count(scene.inbound.external_id) == 1
    assert [(r.purpose, r.status) for r in await rows_of(sessions, scene)] == [
        ("reply", "sent"),
        ("reply", "sent"),
        ("notice", "pending"),
    ]
    await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))  # the notice marks nothing
    first = (await rows_of(sessions, scene))[0]
    await set_row(sessions, first.id, status="pending")  # a reply part sent again marks nothing twice
    assert (await deliver(deps, replies)).sent == 1

    assert sandbox[1].read_marks.count(scene.inbound.external_id) == 1
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == [
        "a",
        "b",
        "not a reply",
        "a",
    ]


async def test_scope_limits_what_is_sent(make_deps, make_scene, sessions, sandbox) -> None:  # type: ignore[no-untyped-def]
    deps, one, other = make_deps(), await make_scene(), await make_scene()
    await write_parts(sessions, one, ["for one"])
    await write_parts(sessions, other, ["for other"])

    report = await deliver(deps, DeliveryScope(conversation_id=one.conversation.id))

    assert report.sent == 1 and report.pending == 0
    assert [m["text"] for m in await sent_by(sandbox[0], one.phone_number_id)] == ["for one"]
    assert await sent_by(sandbox[0], other.phone_number_id) == []
    assert (
        await deliver(deps, DeliveryScope(tenant_id=other.tenant.id, recipient=other.customer.phone))
    ).sent == 1


async def test_every_log_line_of_a_delivery_carries_its_ids(make_deps, make_scene, sessions, sandbox) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    (row,) = await write_parts(sessions, scene, ["hi"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, code=131000, http_status=500)

    with captured_logs() as logs:
        await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))
        await set_row(sessions, row.id, next_attempt_at=past(1))
        await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    ours = [e for e in logs if e["event"].startswith("delivery_")]
    assert [e["event"] for e in ours] == ["delivery_retry", "delivery_sent"]
    assert {(e["tenant_id"], e["conversation_id"], e["trace_id"], e["outbox_id"]) for e in ours} == {
        (str(scene.tenant.id), str(scene.conversation.id), row.trace_id, str(row.id))
    }


async def test_relay_with_media_goes_out_as_text_then_each_item(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    agent = await make_human_agent(sessions, scene, last_inbound_age=timedelta(minutes=1))
    media = (
        {"ref": "1000000000000021", "mime": "image/jpeg", "caption": "[Ana] the box"},
        {"ref": "1000000000000041", "mime": "application/pdf", "filename": "receipt.pdf"},
    )
    item = OutboxItem(
        conversation_id=scene.conversation.id,
        channel="whatsapp",
        channel_account_id=scene.account.id,
        recipient=agent.phone,
        part=OutboundPart(text="[Ana] it arrived broken", media=media),
        purpose=OutboxPurpose.relay,
        audience="agent",
        agent_id=agent.id,
        proxy={"sender": "customer"},
    )
    async with sessions() as session, session.begin():
        await write_outbox(
            session, tenant_id=scene.tenant.id, items=[item], inbound_message_id=scene.inbound.id
        )

    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    sent = await sent_by(sandbox[0], scene.phone_number_id)
    assert [(m["to"], m["type"], m["text"], m["body"].get(m["type"])) for m in sent] == [
        (
            agent.phone,
            "text",
            "[Ana] it arrived broken",
            {"body": "[Ana] it arrived broken", "preview_url": False},
        ),
        (agent.phone, "image", None, {"id": "1000000000000021", "caption": "[Ana] the box"}),
        (agent.phone, "document", None, {"id": "1000000000000041", "filename": "receipt.pdf"}),
    ]
    (row,) = await rows_of(sessions, scene)
    assert (report.sent, row.status, row.external_id, row.purpose) == (1, "sent", sent[-1]["id"], "relay")
    assert {m["biz_opaque_callback_data"] for m in sent} == {row.correlation_id}
    assert sandbox[1].read_marks.count(scene.inbound.external_id) == 0  # a relay is not a reply


async def test_rows_written_by_the_old_senders_are_delivered(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    """A pending row without account or correlation id (written before 0009 or by the old writers)."""
    deps, scene = make_deps(), await make_scene()
    async with sessions() as session, session.begin():
        old = Outbox(
            tenant_id=scene.tenant.id,
            conversation_id=scene.conversation.id,
            channel="whatsapp",
            recipient=scene.customer.phone,
            payload={"type": "text", "text": "from before", "audience": "customer", "handoff": True},
            purpose="notice",
        )
        session.add(old)

    report = await deliver(deps, DeliveryScope(conversation_id=scene.conversation.id))

    async with sessions() as session:
        row = await session.get(Outbox, old.id)
    (sent,) = await sent_by(sandbox[0], scene.phone_number_id)
    assert report.sent == 1 and (row.status, row.external_id) == ("sent", sent["id"])
    assert row.correlation_id == sent["biz_opaque_callback_data"] == f"sb:{old.id.hex}"


async def test_a_message_plus_its_conversation_is_one_pass_the_messages_parts_first_then_the_notice(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene, other = make_deps(), await make_scene(), await make_scene()
    agent = await make_human_agent(sessions, scene, last_inbound_age=timedelta(minutes=5))
    notice = await write_agent_notice(sessions, scene, agent, "New conversation for you")  # the older row
    await write_parts(sessions, scene, TEXTS)
    await write_parts(sessions, other, ["another customer's reply"])

    scope = DeliveryScope(inbound_message_id=scene.inbound.id, plus_conversation_id=scene.conversation.id)
    report = await deliver(deps, scope)

    sent = await sent_by(sandbox[0], scene.phone_number_id)
    assert [(m["to"], m["text"]) for m in sent] == [
        *((scene.customer.phone, t) for t in TEXTS),
        (agent.phone, "New conversation for you"),
    ]
    assert report == DeliveryReport(sent=4, failed=0, pending=0, retry_in_s=None)
    assert notice.inbound_message_id is None
    assert await sent_by(sandbox[0], other.phone_number_id) == []
    assert [r.status for r in await rows_of(sessions, other)] == ["pending"]


def test_plus_conversation_id_goes_with_an_inbound_message_alone() -> None:
    conversation, message = uuid.uuid4(), uuid.uuid4()
    with pytest.raises(ValueError, match="plus_conversation_id goes with inbound_message_id alone"):
        DeliveryScope(plus_conversation_id=conversation)
    with pytest.raises(ValueError, match="plus_conversation_id goes with inbound_message_id alone"):
        DeliveryScope(
            inbound_message_id=message, conversation_id=conversation, plus_conversation_id=conversation
        )
