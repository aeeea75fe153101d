"""A crash between the provider's acceptance and our record: the row stays ``sending`` and is
reconciled by the status callback carrying its correlation id, or sent again once after the grace."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from switchboard.channels.base import SendError, SendErrorKind
from switchboard.outbox.delivery import IN_FLIGHT_S, DeliveryReport, DeliveryScope, deliver
from switchboard.outbox.policy import never_sent, outcome_unknown
from switchboard.outbox.statuses import DeliveryStatus, apply_statuses
from switchboard.queue.keys import parked_status_key

from tests.utils.outbox import captured_logs, past, rows_of, script, sent_by, set_row, write_parts
from tests.utils.whatsapp import channel_service, load_payload
from tests.utils.workers import run_worker_burst


def _status_webhook(scene, *, wamid: str, correlation_id: str, status: str = "sent") -> dict:  # type: ignore[no-untyped-def]
    body = load_payload(
        "status_sent_with_biz_opaque_callback_data.json", phone_number_id=scene.phone_number_id
    )
    item = body["entry"][0]["changes"][0]["value"]["statuses"][0]
    item.update(
        id=wamid, status=status, recipient_id=scene.customer.phone, biz_opaque_callback_data=correlation_id
    )
    return body


@pytest.mark.parametrize("mode", ["accept_then_500", "accept_then_hang"])
async def test_accepted_send_whose_answer_is_lost_is_reconciled_by_its_status_and_never_resent(
    make_deps, make_settings, make_scene, sessions, sandbox, mode
) -> None:  # type: ignore[no-untyped-def]
    deps = make_deps(whatsapp_send_timeout_s=0.5)
    scene = await make_scene()
    (row,) = await write_parts(sessions, scene, ["only once, please"])
    await script(
        sandbox[0], phone_number_id=scene.phone_number_id, mode=mode, delay_s=1.5 if "hang" in mode else 0
    )
    scope = DeliveryScope(inbound_message_id=scene.inbound.id)

    with captured_logs() as logs:
        lost = await deliver(deps, scope)

    (accepted,) = await sent_by(sandbox[0], scene.phone_number_id)
    assert (accepted["text"], accepted["answer"], accepted["biz_opaque_callback_data"]) == (
        "only once, please",
        mode,
        row.correlation_id,
    )
    assert (lost.sent, lost.failed, lost.pending) == (0, 0, 1)
    assert (
        deps.settings.delivery_reconcile_after_s - 1
        < lost.retry_in_s
        <= deps.settings.delivery_reconcile_after_s
    )
    (stuck,) = await rows_of(sessions, scene)
    assert (stuck.status, stuck.external_id, stuck.attempts, stuck.error_code) == (
        "sending",
        None,
        1,
        "no_answer",
    )
    (unknown,) = [e for e in logs if e["event"].startswith("delivery_")]
    assert unknown["event"] == "delivery_outcome_unknown"
    # which failure it was: a read timeout (hang) or the sandbox's 500 without a Graph error code
    assert ("ReadTimeout" in unknown["error"]) is (mode == "accept_then_hang")
    assert (await deliver(deps, scope)).sent == 0  # within the grace: waits for the status

    settings = make_settings()
    async with channel_service(settings) as svc:
        webhook = _status_webhook(scene, wamid=accepted["id"], correlation_id=row.correlation_id)
        assert (await svc.post(webhook)).status_code == 200
    await run_worker_burst(settings)

    (reconciled,) = await rows_of(sessions, scene)
    assert (reconciled.status, reconciled.external_id, reconciled.attempts) == ("sent", accepted["id"], 1)
    assert reconciled.sent_at is not None
    await set_row(sessions, row.id, sending_at=past(3600))  # even long after, nothing is due any more
    assert await deliver(deps, scope) == DeliveryReport(sent=0, failed=0, pending=0, retry_in_s=None)
    assert len(await sent_by(sandbox[0], scene.phone_number_id)) == 1


async def test_without_any_status_within_the_grace_the_part_is_sent_again_once(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    first, second = await write_parts(sessions, scene, ["one", "two"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, mode="accept_then_500")
    scope = DeliveryScope(inbound_message_id=scene.inbound.id)

    lost = await deliver(deps, scope)
    assert (lost.sent, lost.pending) == (0, 2)
    assert [(r.status, r.attempts) for r in await rows_of(sessions, scene)] == [
        ("sending", 1),
        ("pending", 0),
    ]

    grace_s = deps.settings.delivery_reconcile_after_s
    await set_row(sessions, first.id, sending_at=past(grace_s - 5))
    assert (await deliver(deps, scope)).sent == 0  # part two never overtakes an unconfirmed part one
    await set_row(sessions, first.id, sending_at=past(grace_s + 1))
    with captured_logs() as logs:
        resent = await deliver(deps, scope)
    again = await deliver(deps, scope)

    assert resent == DeliveryReport(sent=2, failed=0, pending=0, retry_in_s=None)
    assert again == DeliveryReport(sent=0, failed=0, pending=0, retry_in_s=None)
    sent = await sent_by(sandbox[0], scene.phone_number_id)
    assert [(m["text"], m["answer"]) for m in sent] == [
        ("one", "accept_then_500"),
        ("one", "ok"),
        ("two", "ok"),
    ]
    assert [(r.status, r.attempts, r.external_id) for r in await rows_of(sessions, scene)] == [
        ("sent", 2, sent[1]["id"]),
        ("sent", 1, sent[2]["id"]),
    ]
    unconfirmed = [e for e in logs if e["event"] == "delivery_unconfirmed"]
    assert [(e["log_level"], e["outbox_id"], e["tenant_id"], e["attempts"]) for e in unconfirmed] == [
        ("warning", str(first.id), str(scene.tenant.id), 1)
    ]

    # the first copy's status arrives late: the row keeps the copy it recorded
    late = DeliveryStatus(
        account_id=scene.phone_number_id,
        external_id=sent[0]["id"],
        status="read",
        correlation_id=first.correlation_id,
    )
    assert await apply_statuses(sessions, deps.redis, "whatsapp", [late]) == 0
    assert (await rows_of(sessions, scene))[0].status == "sent"


async def test_unconfirmed_parts_are_dead_lettered_after_the_max_attempts(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(delivery_max_attempts=2), await make_scene()
    (row,) = await write_parts(sessions, scene, ["lost twice"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, mode="accept_then_500", times=2)
    scope = DeliveryScope(inbound_message_id=scene.inbound.id)

    await deliver(deps, scope)
    await set_row(sessions, row.id, sending_at=past(deps.settings.delivery_reconcile_after_s + 1))
    await deliver(deps, scope)
    await set_row(sessions, row.id, sending_at=past(deps.settings.delivery_reconcile_after_s + 1))
    report = await deliver(deps, scope)

    assert report == DeliveryReport(sent=0, failed=1, pending=0, retry_in_s=None)
    (dead,) = await rows_of(sessions, scene)
    assert (dead.status, dead.error_code, dead.attempts) == ("failed", "dead_letter", 2)
    assert len(await sent_by(sandbox[0], scene.phone_number_id)) == 2


async def test_without_correlation_echo_a_sending_row_goes_back_to_pending_once_in_flight_time_passed(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(echo=False), await make_scene()
    (row,) = await write_parts(sessions, scene, ["from a dead worker"])
    await set_row(sessions, row.id, status="sending", sending_at=past(IN_FLIGHT_S - 10), attempts=1)
    scope = DeliveryScope(inbound_message_id=scene.inbound.id)

    assert (await deliver(deps, scope)).sent == 0  # a live worker may still be sending it
    await set_row(sessions, row.id, sending_at=past(IN_FLIGHT_S + 1))
    with captured_logs() as logs:
        report = await deliver(deps, scope)

    assert report.sent == 1
    assert [m["text"] for m in await sent_by(sandbox[0], scene.phone_number_id)] == ["from a dead worker"]
    assert [e["event"] for e in logs if e["event"].startswith("delivery_")] == [
        "delivery_sending_released",
        "delivery_sent",
    ]
    (sent,) = await rows_of(sessions, scene)
    assert (sent.status, sent.attempts) == ("sent", 2)


async def test_without_correlation_echo_a_lost_answer_is_retried_with_backoff(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(echo=False), await make_scene()
    await write_parts(sessions, scene, ["no echo"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, mode="accept_then_500")

    report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    (row,) = await rows_of(sessions, scene)
    assert (row.status, row.attempts, row.error_code) == ("pending", 1, "transient")
    assert report.pending == 1 and report.retry_in_s <= deps.settings.delivery_backoff_base_s


async def _sandbox_record(sandbox, phone_number_id: str) -> dict:  # type: ignore[no-untyped-def]
    for _ in range(500):  # poll the sandbox's state (the send is in flight), at most ~5 s
        recorded = await sent_by(sandbox[0], phone_number_id)
        if recorded:
            return recorded[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the sandbox never recorded the send")


async def test_status_for_a_provider_id_not_stored_yet_is_parked_then_applied(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    await write_parts(sessions, scene, ["slow answer"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, mode="delay", delay_s=1.0)

    sending = asyncio.create_task(deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id)))
    record = await _sandbox_record(sandbox, scene.phone_number_id)
    early = DeliveryStatus(account_id=scene.phone_number_id, external_id=record["id"], status="delivered")
    assert await apply_statuses(sessions, deps.redis, "whatsapp", [early]) == 0  # no row has that id yet
    key = parked_status_key("whatsapp", scene.phone_number_id, record["id"])
    assert 3590 < await deps.redis.ttl(key) <= 3600
    report = await sending

    assert report.sent == 1
    (row,) = await rows_of(sessions, scene)
    assert (row.status, row.external_id) == ("delivered", record["id"])
    assert not await deps.redis.exists(key)


async def test_status_by_correlation_while_the_send_is_in_flight(
    make_deps, make_scene, sessions, sandbox
) -> None:  # type: ignore[no-untyped-def]
    deps, scene = make_deps(), await make_scene()
    (written,) = await write_parts(sessions, scene, ["racing the callback"])
    await script(sandbox[0], phone_number_id=scene.phone_number_id, mode="delay", delay_s=1.0)

    sending = asyncio.create_task(deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id)))
    record = await _sandbox_record(sandbox, scene.phone_number_id)
    read = DeliveryStatus(
        account_id=scene.phone_number_id,
        external_id=record["id"],
        status="read",
        correlation_id=written.correlation_id,
    )
    assert await apply_statuses(sessions, deps.redis, "whatsapp", [read]) == 1
    report = await sending

    assert report.sent == 1
    (row,) = await rows_of(sessions, scene)
    assert (row.status, row.external_id, row.attempts) == ("read", record["id"], 1)
    assert len(await sent_by(sandbox[0], scene.phone_number_id)) == 1


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_connection_never_made_is_sent_again_with_back_off_not_held_for_reconcile(
    make_deps, make_scene, sessions
) -> None:  # type: ignore[no-untyped-def]
    """A refused connect cannot have reached Meta: the part is retried with back-off (seconds), not
    held ``sending`` for the reconcile grace (120 s) as a maybe-accepted send is."""
    deps = make_deps(whatsapp_graph_base_url=f"http://127.0.0.1:{_closed_port()}")
    scene = await make_scene()
    (row,) = await write_parts(sessions, scene, ["after the outage"])

    with captured_logs() as logs:
        report = await deliver(deps, DeliveryScope(inbound_message_id=scene.inbound.id))

    (after,) = await rows_of(sessions, scene)
    assert (after.status, after.attempts, after.external_id) == ("pending", 1, None)
    assert after.error_code == "transient"
    assert "ConnectError" in (after.error_message or "")
    assert report.pending == 1 and report.retry_in_s is not None
    assert report.retry_in_s < deps.settings.delivery_reconcile_after_s / 2
    events = [e["event"] for e in logs if e["event"].startswith("delivery_")]
    assert events == ["delivery_retry"]


def test_never_sent_reads_the_cause_chain_and_only_connect_failures_count() -> None:
    request = httpx.Request("POST", "https://graph.example/v23.0/1/messages")
    for cause, expected in (
        (httpx.ConnectError("refused", request=request), True),
        (httpx.ConnectTimeout("connect", request=request), True),
        (httpx.PoolTimeout("pool", request=request), True),
        (httpx.ReadTimeout("read", request=request), False),
        (httpx.RemoteProtocolError("dropped", request=request), False),
    ):
        try:
            try:
                raise cause
            except httpx.HTTPError as exc:
                raise SendError("network error", kind=SendErrorKind.transient) from exc
        except SendError as error:
            assert never_sent(error) is expected, cause
            assert outcome_unknown(error) is (not expected), cause
