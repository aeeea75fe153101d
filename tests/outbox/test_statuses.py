"""Delivery statuses: forward only in every order, idempotent, matched by provider id or correlation id,
parked when the provider id is not stored yet (bounded)."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime

from switchboard.channels.whatsapp.statuses import conversation_block_reason
from switchboard.db.models import Conversation, Outbox
from switchboard.live_updates import tenant_channel
from switchboard.outbox.statuses import (
    PARKED_TTL_S,
    STATUS_RANK,
    DeliveryStatus,
    apply_statuses,
    next_status,
    park_status,
    take_parked,
    to_delivery_statuses,
)
from switchboard.queue.keys import parked_status_index_key, parked_status_key

from tests.utils.outbox import captured_logs, rows_of, write_parts

PROVIDER_STATUSES = ["sent", "delivered", "read", "played", "failed"]


def _expected(sequence: tuple[str, ...]) -> str:
    """The documented rule, stated without the code's loop: ``failed`` wins unless ``read``/``played``
    came before it; otherwise the highest-ranked status that arrived."""
    forward = [s for s in sequence if s != "failed"]
    if "failed" in sequence:
        before_failed = sequence[: sequence.index("failed")]
        if not {"read", "played"} & set(before_failed):
            return "failed"
    return max(forward, key=STATUS_RANK.__getitem__) if forward else "sending"


def _status(account_id: str, external_id: str, status: str, **extra: str) -> DeliveryStatus:
    return DeliveryStatus(account_id=account_id, external_id=external_id, status=status, **extra)


def test_rank_covers_every_provider_status_in_order() -> None:
    assert sorted(STATUS_RANK, key=STATUS_RANK.__getitem__) == [
        "pending",
        "sending",
        "sent",
        "delivered",
        "read",
        "played",
    ]
    assert [next_status(current, "failed") for current in STATUS_RANK] == [
        "failed",
        "failed",
        "failed",
        "failed",
        None,
        None,
    ]
    assert next_status("failed", "read") is None and next_status("read", "played") == "played"
    assert next_status("played", "read") is None and next_status("read", "sent") is None
    assert next_status("sent", "deleted") is None  # unknown statuses change nothing


async def _rows_with_ids(sessions, scene, count: int) -> list[Outbox]:  # type: ignore[no-untyped-def]
    rows = await write_parts(sessions, scene, [f"part {i}" for i in range(count)])
    async with sessions() as session, session.begin():
        for row in rows:
            stored = await session.get(Outbox, row.id)
            stored.status, stored.external_id = "sending", f"wamid.{uuid.uuid4().hex}"
            session.add(stored)
    return await rows_of(sessions, scene)


async def test_every_order_of_statuses_ends_where_the_rule_says_and_repeats_change_nothing(
    make_scene, sessions, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    """Table-driven over every ordering (hypothesis is not installed): 5! orders, each applied twice."""
    scene = await make_scene()
    orders = list(itertools.permutations(PROVIDER_STATUSES))
    rows = await _rows_with_ids(sessions, scene, len(orders))
    pid = scene.phone_number_id

    for row, order in zip(rows, orders, strict=True):
        statuses = [_status(pid, row.external_id, s, error_code="131026") for s in order]
        await apply_statuses(sessions, arq_redis, "whatsapp", statuses)
        assert await apply_statuses(sessions, arq_redis, "whatsapp", statuses) == 0, order

    final = {row.external_id: row.status for row in await rows_of(sessions, scene)}
    got = {order: final[row.external_id] for row, order in zip(rows, orders, strict=True)}
    assert got == {order: _expected(order) for order in orders}
    assert {got[o] for o in orders} == {"failed", "played"}


async def test_played_outranks_read_and_late_sent_or_delivered_change_nothing(
    make_scene, sessions, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    scene = await make_scene()
    voice, text = await _rows_with_ids(sessions, scene, 2)
    pid = scene.phone_number_id

    changes = [
        await apply_statuses(sessions, arq_redis, "whatsapp", [_status(pid, voice.external_id, s)])
        for s in ("read", "played", "read", "delivered")
    ]
    changes += [
        await apply_statuses(sessions, arq_redis, "whatsapp", [_status(pid, text.external_id, s)])
        for s in ("read", "sent", "delivered", "sent")
    ]

    assert changes == [1, 1, 0, 0, 1, 0, 0, 0]
    assert [r.status for r in await rows_of(sessions, scene)] == ["played", "read"]


async def test_failed_status_records_the_code_and_blocks_the_customers_conversation(
    make_scene, sessions, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    scene = await make_scene()
    (row,) = await _rows_with_ids(sessions, scene, 1)
    job_args = [
        {
            "account_id": scene.phone_number_id,
            "external_id": row.external_id,
            "status": "failed",
            "timestamp": "2026-12-01T10:00:00+00:00",
            "recipient_id": scene.customer.phone,
            "error_code": 131047,
            "error_title": "Re-engagement message",
            "biz_opaque_callback_data": None,
            "conversation_reason": conversation_block_reason(131047),
        }
    ]

    assert await apply_statuses(sessions, arq_redis, "whatsapp", to_delivery_statuses(job_args)) == 1

    (failed,) = await rows_of(sessions, scene)
    assert (failed.status, failed.error_code, failed.error_message) == (
        "failed",
        "131047",
        "Re-engagement message",
    )
    async with sessions() as session:
        conversation = await session.get(Conversation, scene.conversation.id)
    assert conversation.escalation_reason == (
        "whatsapp 131047: outside the 24-hour window; needs a template message or a human"
    )


async def test_correlation_id_fills_the_provider_id_of_a_sending_row(make_scene, sessions, arq_redis) -> None:  # type: ignore[no-untyped-def]
    scene = await make_scene()
    (row,) = await write_parts(sessions, scene, ["answer lost"])
    async with sessions() as session, session.begin():
        stored = await session.get(Outbox, row.id)
        stored.status = "sending"
    wamid = f"wamid.{uuid.uuid4().hex}"

    with captured_logs() as logs:
        changed = await apply_statuses(
            sessions,
            arq_redis,
            "whatsapp",
            [_status(scene.phone_number_id, wamid, "delivered", correlation_id=row.correlation_id)],
        )

    assert changed == 1
    (filled,) = await rows_of(sessions, scene)
    assert (filled.status, filled.external_id) == ("delivered", wamid) and filled.sent_at is not None
    assert [e["outbox_id"] for e in logs if e["event"] == "delivery_reconciled_by_correlation"] == [
        str(row.id)
    ]
    assert not await arq_redis.exists(parked_status_key("whatsapp", scene.phone_number_id, wamid))


async def test_statuses_of_other_channels_never_touch_a_row(make_scene, sessions, arq_redis) -> None:  # type: ignore[no-untyped-def]
    scene = await make_scene()
    (row,) = await _rows_with_ids(sessions, scene, 1)

    changed = await apply_statuses(
        sessions, arq_redis, "instagram", [_status("ig-1", row.external_id, "read")]
    )

    assert changed == 0 and (await rows_of(sessions, scene))[0].status == "sending"
    assert [s.status for s in await take_parked(arq_redis, "instagram", "ig-1", row.external_id)] == ["read"]


async def test_parking_is_bounded_per_account_and_expires(arq_redis) -> None:  # type: ignore[no-untyped-def]
    account = f"acct-{uuid.uuid4().hex[:8]}"
    ids = [f"wamid.P{i}" for i in range(5)]
    for external_id in ids:
        await park_status(arq_redis, "whatsapp", _status(account, external_id, "sent"), max_per_account=3)
    await park_status(arq_redis, "whatsapp", _status(account, ids[4], "delivered"), max_per_account=3)

    index = parked_status_index_key("whatsapp", account)
    assert [m.decode() for m in await arq_redis.zrange(index, 0, -1)] == ids[2:]
    assert [await arq_redis.exists(parked_status_key("whatsapp", account, i)) for i in ids] == [0, 0, 1, 1, 1]
    assert (
        PARKED_TTL_S - 5 < await arq_redis.ttl(parked_status_key("whatsapp", account, ids[4])) <= PARKED_TTL_S
    )
    taken = await take_parked(arq_redis, "whatsapp", account, ids[4])
    assert [(s.external_id, s.status) for s in taken] == [(ids[4], "sent"), (ids[4], "delivered")]
    assert await take_parked(arq_redis, "whatsapp", account, ids[4]) == []
    assert [m.decode() for m in await arq_redis.zrange(index, 0, -1)] == ids[2:4]


async def test_status_job_arguments_become_neutral_statuses() -> None:
    assert to_delivery_statuses(
        [
            {
                "account_id": "106",
                "external_id": "wamid.A",
                "status": "READ",
                "timestamp": "2026-12-01T10:00:00+00:00",
                "error_code": None,
                "biz_opaque_callback_data": "sb:abc",
            },
            {"account_id": "106", "external_id": "", "status": "sent"},
            {
                "account_id": "106",
                "external_id": "wamid.B",
                "status": "failed",
                "error_code": 131026,
                "error_title": "x",
                "conversation_reason": "whatsapp 131026: message undeliverable to this customer",
            },
        ]
    ) == [
        DeliveryStatus(
            account_id="106",
            external_id="wamid.A",
            status="read",
            timestamp=datetime(2026, 12, 1, 10, tzinfo=UTC),
            correlation_id="sb:abc",
        ),
        DeliveryStatus(
            account_id="106",
            external_id="wamid.B",
            status="failed",
            error_code="131026",
            error_title="x",
            conversation_reason="whatsapp 131026: message undeliverable to this customer",
        ),
    ]


async def test_a_status_that_moves_a_row_tells_the_open_console_pages(
    make_scene, sessions, arq_redis
) -> None:  # type: ignore[no-untyped-def]
    scene = await make_scene()
    (row,) = await _rows_with_ids(sessions, scene, 1)
    pubsub = arq_redis.pubsub()
    await pubsub.subscribe(tenant_channel(scene.tenant.id))
    try:
        await pubsub.get_message(timeout=1.0)  # the subscribe confirmation
        pid = scene.phone_number_id
        assert (
            await apply_statuses(
                sessions, arq_redis, "whatsapp", [_status(pid, row.external_id, "delivered")]
            )
            == 1
        )
        assert (
            await apply_statuses(
                sessions, arq_redis, "whatsapp", [_status(pid, row.external_id, "delivered")]
            )
            == 0
        )

        events = []
        while (message := await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)) is not None:
            events.append(json.loads(message["data"]))
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()
    assert events == [
        {"conversation_id": str(scene.conversation.id), "kind": "delivery"}
    ]  # once: a repeat is silent
