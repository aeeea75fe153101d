"""An operator's retry of failed outbox parts: the whole reply goes out again through the delivery loop,
in order, once; a second retry, or a part the provider accepted, is refused."""

from __future__ import annotations

import asyncio

import pytest
from switchboard.outbox.delivery import DeliveryReport, DeliveryScope, deliver
from switchboard.outbox.retry import NotRetryable, failed_parts, requeue_failed

from tests.utils.outbox import rows_of, script, sent_by, set_row, write_parts

TEXTS = ["part one", "part two"]


async def _dead_reply(make_deps, make_scene, sessions, sandbox):  # type: ignore[no-untyped-def]
    """A two-part reply the real loop dead-lettered (one attempt allowed, the Graph API failing)."""
    deps, scene = make_deps(delivery_max_attempts=1), await make_scene()
    rows = await write_parts(sessions, scene, TEXTS)
    await script(sandbox[0], phone_number_id=scene.phone_number_id, code=131000, http_status=500, times=1)
    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))
    assert (report.sent, report.failed) == (0, 2)
    return deps, scene, rows


async def test_a_retried_reply_goes_out_in_order_once_with_its_correlation_ids(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene, rows = await _dead_reply(make_deps, make_scene, sessions, sandbox)
    async with sessions() as session:
        listed = await failed_parts(session, tenant_id=scene.tenant.id)
    assert [
        (p["id"], p["error_code"], p["retryable"]) for p in sorted(listed, key=lambda p: p["part_index"])
    ] == [
        (rows[0].id, "dead_letter", True),
        (rows[1].id, "dead_letter", True),
    ]

    async with sessions() as session, session.begin():  # Retry on the second part: the whole reply
        requeued = await requeue_failed(session, rows[1].id, actor="test")
    assert [r.id for r in requeued] == [rows[0].id, rows[1].id]
    async with sessions() as session, session.begin():
        with pytest.raises(NotRetryable):  # a second click finds nothing failed
            await requeue_failed(session, rows[0].id, actor="test")

    report = await deliver(deps, DeliveryScope(conversation_id=scene.conversation.id))
    again = await deliver(deps, DeliveryScope(conversation_id=scene.conversation.id))

    assert report == DeliveryReport(sent=2, failed=0, pending=0, retry_in_s=None)
    assert again == DeliveryReport(sent=0, failed=0, pending=0, retry_in_s=None)
    sent = await sent_by(sandbox[0], scene.phone_number_id)
    assert [m["text"] for m in sent] == TEXTS
    assert [m["biz_opaque_callback_data"] for m in sent] == [r.correlation_id for r in rows]
    after = await rows_of(sessions, scene)
    assert [(r.status, r.attempts, r.error_code) for r in after] == [("sent", 1, None), ("sent", 1, None)]
    async with sessions() as session:
        assert await failed_parts(session, tenant_id=scene.tenant.id) == []
        with pytest.raises(NotRetryable):  # sent rows are never requeued
            await requeue_failed(session, rows[0].id, actor="test")


async def test_two_retries_at_once_requeue_the_reply_once(make_deps, make_scene, sessions, sandbox) -> None:  # type: ignore[no-untyped-def]
    deps, scene, rows = await _dead_reply(make_deps, make_scene, sessions, sandbox)

    async def retry(row_id):  # type: ignore[no-untyped-def]
        async with sessions() as session, session.begin():
            return await requeue_failed(session, row_id, actor="test")

    results = await asyncio.gather(retry(rows[0].id), retry(rows[1].id), return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["NotRetryable", "list"]
    await deliver(deps, DeliveryScope(conversation_id=scene.conversation.id))
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == TEXTS


async def test_a_part_the_provider_accepted_is_not_retried_and_tenants_are_kept_apart(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    scene, other = await make_scene(), await make_scene()
    (row,) = await write_parts(sessions, scene, ["accepted, then reported failed"])
    await set_row(sessions, row.id, status="failed", external_id="wamid.accepted", error_code="131026")
    (theirs,) = await write_parts(sessions, other, ["not yours"])
    await set_row(sessions, theirs.id, status="failed", error_code="dead_letter")
    async with sessions() as session:
        listed = await failed_parts(session, tenant_id=scene.tenant.id)
        assert [(p["id"], p["retryable"]) for p in listed] == [(row.id, False)]
        with pytest.raises(NotRetryable):
            await requeue_failed(session, row.id, actor="test")
        with pytest.raises(NotRetryable):
            await requeue_failed(session, theirs.id, actor="test", tenant_id=scene.tenant.id)
    assert [r.status for r in await rows_of(sessions, scene)] == ["failed"]
