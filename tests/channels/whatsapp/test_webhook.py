"""The webhook endpoint: handshake, signatures, limits, durable dedup, routing, control events."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text as sql
from structlog.testing import capture_logs
from switchboard.db.models import InboundState
from switchboard.observability import tracing
from switchboard.queue import Queue

from tests.utils.rows import messages_of
from tests.utils.whatsapp import VERIFY_TOKEN, channel_service, encode, load_payload, text_body

IN_01 = "wamid.HBgLMTU1NTAxMDAwOTkVAgASGBQzQUZBMDAwMDAwMDAwMDAwMDAwMQA="


pytestmark = pytest.mark.usefixtures("stops_at_the_queue")  # these tests stop at the queue: no worker


async def _queued_job_ids(arq_pool) -> set[str]:  # type: ignore[no-untyped-def]
    """Jobs waiting in the chat queue: this test's only (the queues are empty when a test starts)."""
    return {job_id.decode() for job_id in await arq_pool.zrange(Queue.chat.value, 0, -1)}


async def test_handshake_echoes_challenge_only_with_right_token(make_settings) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(make_settings()) as svc:
        ok = await svc.client.get(
            "/webhooks/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1158201444"},
        )
        bad = await svc.client.get(
            "/webhooks/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"},
        )
        wrong_mode = await svc.client.get(
            "/webhooks/whatsapp",
            params={"hub.mode": "unsubscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"},
        )
    assert (ok.status_code, ok.text) == (200, "1158201444")
    assert bad.status_code == 403 and wrong_mode.status_code == 403


async def test_missing_or_bad_signature_stores_nothing(make_settings, wa_tenant, sessions, arq_pool) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("text.json", phone_number_id=wa_tenant.phone_number_id)
    async with channel_service(make_settings()) as svc:
        missing = await svc.post(body, signature=None)
        wrong = await svc.post(body, signature="sha256=" + "0" * 64)
        other_secret = await svc.post(body, secret="another-secret")
        tampered_raw = encode(body)
        from switchboard.channels.whatsapp import sign_body

        sig = sign_body(tampered_raw, "test-app-secret")
        tampered = await svc.post(tampered_raw.replace(b"color", b"colour"), signature=sig)
    assert missing.status_code == 401
    assert (wrong.status_code, other_secret.status_code, tampered.status_code) == (403, 403, 403)
    assert await messages_of(sessions, wa_tenant.tenant.id) == []


async def test_too_large_body_is_413(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    body = text_body(phone_number_id=wa_tenant.phone_number_id, wamid="wamid.BIG", text="x" * 5000)
    async with channel_service(make_settings(whatsapp_max_body_bytes=2048)) as svc:
        response = await svc.post(body)
    assert response.status_code == 413
    assert await messages_of(sessions, wa_tenant.tenant.id) == []


async def test_malformed_json_and_unknown_object_answer_200_and_store_nothing(
    make_settings, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(make_settings()) as svc:
        malformed = await svc.post(b'{"object": "whatsapp_business_account", "entry": [')
        other = await svc.post({"object": "page", "entry": []})
    assert (malformed.status_code, malformed.json()["reason"]) == (200, "malformed json")
    assert (other.status_code, other.json()["reason"]) == (200, "unknown object")
    assert await messages_of(sessions, wa_tenant.tenant.id) == []


async def test_unknown_phone_number_id_is_200_and_logged(make_settings, sessions) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("text.json", phone_number_id="999000000000999")
    async with channel_service(make_settings()) as svc:
        with capture_logs() as logs:
            response = await svc.post(body)
            bad = await svc.post(body, signature="sha256=00")
    assert response.status_code == 200 and bad.status_code == 403
    assert response.json()["unknown_accounts"] == ["999000000000999"] and response.json()["stored"] == 0
    unknown = [e for e in logs if e["event"] == "webhook_unknown_account"]
    assert unknown == [
        {
            "event": "webhook_unknown_account",
            "channel": "whatsapp",
            "account_id": "999000000000999",
            "log_level": "warning",
        }
    ]
    assert {
        "event": "webhook_rejected",
        "channel": "whatsapp",
        "reason": "bad signature",
        "log_level": "warning",
    } in logs


async def test_text_is_stored_once_and_enqueued(make_settings, wa_tenant, sessions, arq_pool) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("text.json", phone_number_id=wa_tenant.phone_number_id)
    async with channel_service(make_settings()) as svc:
        first = await svc.post(body)
        again = await svc.post(body)
    assert first.json()["stored"] == 1 and again.json() == {**again.json(), "stored": 0, "duplicates": 1}
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert len(rows) == 1
    row = rows[0]
    assert (row.external_id, row.text, row.kind, row.inbound_state) == (
        IN_01,
        "Hi! Does it come in another color?",
        "text",
        "pending",
    )
    assert row.conversation_id is None and row.sender_external_id == "15550100099"
    assert await _queued_job_ids(arq_pool) == {f"inbound:{row.id}"}


async def test_concurrent_duplicates_on_two_processes_insert_once(
    make_settings, wa_tenant, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("batch_multiple_messages_and_status.json", phone_number_id=wa_tenant.phone_number_id)
    settings = make_settings()
    async with channel_service(settings) as a, channel_service(settings) as b:
        responses = await asyncio.gather(a.post(body), b.post(body), a.post(body), b.post(body))
    assert all(r.status_code == 200 for r in responses)
    assert sum(r.json()["stored"] for r in responses) == 3
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert sorted(r.text for r in rows) == ["Necesito ayuda con mi pedido", "anyone there", "hello?"]
    queued = await _queued_job_ids(arq_pool)  # one job per stored row, one for the (same) status
    (status_job,) = queued - {f"inbound:{r.id}" for r in rows}
    assert len(queued) == 4 and status_job.startswith("statuses:whatsapp:")


async def test_database_down_answers_503_and_redelivery_is_stored(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("text_reply_with_context.json", phone_number_id=wa_tenant.phone_number_id)
    down = make_settings(database_url="postgresql://nobody@127.0.0.1:1/none")
    async with channel_service(down) as svc:
        with capture_logs() as logs:
            response = await svc.post(body)
    assert response.status_code == 503
    assert [e["log_level"] for e in logs if e["event"] == "webhook_store_failed"] == ["error"]
    assert await messages_of(sessions, wa_tenant.tenant.id) == []
    async with channel_service(make_settings()) as svc:
        redelivered = await svc.post(body)
    assert redelivered.status_code == 200 and redelivered.json()["stored"] == 1
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert [(r.text, r.reply_to_external_id) for r in rows] == [
        ("yes, that one", "wamid.HBgLMTU1NTAxMDAwOTkVAgARGBI0RUZBMDAwMDAwMDAwMDAwMDIA")
    ]


async def test_redis_down_still_stores_and_answers_200(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    body = load_payload("video_with_caption.json", phone_number_id=wa_tenant.phone_number_id)
    settings = make_settings()
    async with channel_service(settings) as svc:
        pool = svc.app.state.resources.redis
        svc.app.state.resources.redis = None  # the pool is gone: enqueue cannot happen
        response = await svc.post(body)
        svc.app.state.resources.redis = pool
    assert response.status_code == 200 and response.json()["stored"] == 1
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert (
        rows[0].inbound_state == InboundState.pending.value and rows[0].media[0]["ref"] == "1000000000000041"
    )


async def test_edit_and_revoke_change_the_original(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    pid = wa_tenant.phone_number_id
    async with channel_service(make_settings()) as svc:
        await svc.post(load_payload("text.json", phone_number_id=pid))
        await svc.post(load_payload("image_with_caption.json", phone_number_id=pid))
        edit = await svc.post(load_payload("edit_by_customer.json", phone_number_id=pid))
        revoke = await svc.post(load_payload("revoke_deleted_by_customer.json", phone_number_id=pid))
    assert edit.json()["stored"] == 0 and revoke.json()["stored"] == 0
    rows = {r.kind: r for r in await messages_of(sessions, wa_tenant.tenant.id)}
    assert set(rows) == {"text", "image"}
    assert (
        rows["image"].text == "This arrived broken 😞 (box was fine though)" and "edited" in rows["image"].raw
    )
    assert rows["text"].inbound_state == "done" and rows["text"].last_error.startswith("revoked")
    assert "deleted" in rows["text"].raw


async def test_every_payload_through_the_endpoint(make_settings, wa_tenant, sessions, engine) -> None:  # type: ignore[no-untyped-def]
    from tests.utils.whatsapp import PAYLOAD_DIR

    async with channel_service(make_settings()) as svc:
        for path in sorted(PAYLOAD_DIR.glob("*.json")):
            response = await svc.post(load_payload(path.name, phone_number_id=wa_tenant.phone_number_id))
            assert response.status_code == 200, path.name
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    # 45 files: 5 status-only + 1 errors-only + edit + revoke + user_preferences + calls + an empty entry
    # store no row; the batch stores 3.
    assert len(rows) == 45 - 11 + 2
    by_kind = {}
    for r in rows:
        by_kind.setdefault(r.kind, []).append(r)
    assert by_kind["system"][0].sender_external_id == "15550100099"
    echo = [r for r in rows if r.direction == "outbound"]
    assert len(echo) == 1 and echo[0].role == "human_agent"
    async with engine.connect() as conn:
        empty = (
            await conn.execute(
                sql("SELECT count(*) FROM messages WHERE tenant_id = :t AND sender_external_id = ''"),
                {"t": wa_tenant.tenant.id},
            )
        ).scalar()
    assert empty == 0


async def test_unicode_rtl_emoji_and_long_text_stored_intact(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    text = ("مرحبا، أين طلبي؟ 🌵 Zoë — ") * 200 + "\u200f end"
    assert len(text) > 4096
    body = text_body(
        phone_number_id=wa_tenant.phone_number_id, wamid="wamid.UNICODE", text=text, name="Zoë Tester 🌵"
    )
    async with channel_service(make_settings()) as svc:
        response = await svc.post(body)  # Meta-style escaped JSON bytes, signed as sent
        raw_utf8 = (
            __import__("json")
            .dumps(
                text_body(phone_number_id=wa_tenant.phone_number_id, wamid="wamid.UNICODE2", text=text),
                ensure_ascii=False,
            )
            .encode()
        )
        response_utf8 = await svc.post(raw_utf8)
    assert response.json()["stored"] == 1 and response_utf8.json()["stored"] == 1
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert [r.text for r in rows] == [text, text]
    assert rows[0].raw["normalized"]["sender_name"] == "Zoë Tester 🌵"


async def test_sandbox_is_mounted_while_enabled_next_to_a_real_graph_api(make_settings) -> None:  # type: ignore[no-untyped-def]
    """The Graph API is chosen per number (``api_base_url``), so a process whose default is the real API
    still serves the sandbox for the numbers on it; WHATSAPP_SANDBOX_ENABLED=false removes it."""
    import httpx

    from services.whatsapp.main import create_app

    async def status(settings) -> int:  # type: ignore[no-untyped-def]
        transport = httpx.ASGITransport(app=create_app(settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://wa.test") as client:
            token = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
            return (await client.get("/_sandbox/graph/_control/sent", headers=token)).status_code

    assert await status(make_settings(whatsapp_sandbox_enabled=True, whatsapp_graph_base_url=None)) == 200
    assert (
        await status(
            make_settings(whatsapp_sandbox_enabled=True, whatsapp_graph_base_url="https://graph.facebook.com")
        )
        == 200
    )
    assert await status(make_settings(whatsapp_sandbox_enabled=False, whatsapp_graph_base_url=None)) == 404


async def test_ids_longer_than_their_columns_are_stored_unprocessable_beside_a_valid_sibling(
    make_settings, wa_tenant, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    pid = wa_tenant.phone_number_id
    body = text_body(phone_number_id=pid, wamid="wamid.SIBLING-OK", text="hello")
    messages = body["entry"][0]["changes"][0]["value"]["messages"]
    base = messages[0]
    messages += [
        {**base, "id": "wamid.LONG-PHONE", "from": "1" * 40},  # customers.phone holds 32
        {**base, "id": "wamid.LONG-BSUID", "from": "", "from_user_id": "US." + "1" * 300},  # 255
        {**base, "id": "wamid." + "X" * 600},  # messages.external_id holds 512
    ]
    async with channel_service(make_settings()) as svc:
        response = await svc.post(body)
        again = await svc.post(body)  # redelivered: the digest of the long id is a duplicate too
    assert response.status_code == 200 and response.json()["stored"] == 1
    assert again.json()["duplicates"] == 4
    rows = {r.external_id[:20]: r for r in await messages_of(sessions, wa_tenant.tenant.id)}
    assert rows["wamid.SIBLING-OK"].inbound_state == "pending"
    assert (rows["wamid.LONG-PHONE"].inbound_state, rows["wamid.LONG-PHONE"].last_error) == (
        "done",
        "unprocessable: wa_id longer than 32 characters",
    )
    assert rows["wamid.LONG-BSUID"].last_error.startswith("unprocessable: unreadable text: ValidationError")
    long_id = next(r for key, r in rows.items() if key.startswith("sha256:"))
    assert long_id.last_error == "unprocessable: message id longer than 512 characters"
    assert await _queued_job_ids(arq_pool) == {f"inbound:{rows['wamid.SIBLING-OK'].id}"}


async def test_the_shared_ingest_cleans_messages_that_never_passed_the_webhook_route(
    wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    # Gmail's sync hands its messages to ingest_delivery directly: the same cleaning applies there
    from datetime import UTC, datetime

    from switchboard.channels.accounts import AccountDirectory
    from switchboard.channels.ingest import NormalizedDelivery, ingest_delivery
    from switchboard.contracts import InboundMessage, SenderIdentity

    message = InboundMessage(
        channel="whatsapp",
        account_id=wa_tenant.phone_number_id,
        kind="text",
        action="process",
        external_id="wamid.INGEST\x00NUL",
        sender_id="15550100099",
        sent_at=datetime.now(UTC),
        text="caf\x00e \ud800 ok",
        identities=[SenderIdentity(kind="wa_id", value="15550100099")],
        raw={"message": {"note": "a\x00b", "bad": "\udfff"}},
    )
    result = await ingest_delivery(
        delivery=NormalizedDelivery(messages=[message]),
        sessions=sessions,
        redis=None,
        accounts=AccountDirectory(sessions, "whatsapp"),
        debounce_s=0,
    )
    assert len(result.stored_ids) == 1
    (row,) = await messages_of(sessions, wa_tenant.tenant.id)
    assert (row.external_id, row.text, row.inbound_state) == ("wamid.INGESTNUL", "cafe \ufffd ok", "pending")
    assert row.raw["message"] == {"note": "ab", "bad": "\ufffd"}


async def test_many_more_concurrent_deliveries_than_pooled_connections_are_each_stored_once(
    make_settings, wa_tenant, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    """The service's inserts take at most 20 connections (its driver pool): 120 deliveries at once
    (1 in 6 a redelivery) queue for them, all answer 200, each message is stored and enqueued once,
    every connection is back, and none went through the engine's pool."""
    pid = wa_tenant.phone_number_id
    bodies = [text_body(phone_number_id=pid, wamid=f"wamid.MANY{i:04d}", text=f"m{i}") for i in range(100)]
    async with channel_service(make_settings()) as svc:
        responses = await asyncio.gather(*(svc.post(b) for b in [*bodies, *bodies[:20]]))
        driver = svc.app.state.resources.driver.pool
        # tracing is per process, on once a tracing test ran (random order): then the inserts take the
        # traced engine path and the driver pool stays empty
        used = 0 if tracing.is_enabled() else 1
        assert driver.get_max_size() == 20 and used <= driver.get_size() <= 20
        assert driver.get_idle_size() == driver.get_size()  # every connection back
        pool = svc.app.state.resources.engine.pool
        assert (pool.size(), pool.checkedout()) == (5, 0)
    assert [r.status_code for r in responses] == [200] * 120
    assert sum(r.json()["stored"] for r in responses) == 100
    assert sum(r.json()["duplicates"] for r in responses) == 20
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert sorted(r.text for r in rows) == sorted(f"m{i}" for i in range(100))
    assert await _queued_job_ids(arq_pool) == {f"inbound:{r.id}" for r in rows}


async def test_the_service_freezes_its_start_up_objects_and_raises_the_gc_thresholds(make_settings) -> None:  # type: ignore[no-untyped-def]
    """Once ready, start-up objects are frozen and young collections wait for 10,000 objects: at
    CPython's 700 a full collection of every unfrozen object came every ~15-30 s under load."""
    import gc

    from switchboard.service_app import GC_THRESHOLDS

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's default, whatever an earlier service set
    try:
        async with channel_service(make_settings()):
            assert gc.get_threshold() == GC_THRESHOLDS == (10_000, 20, 100)
            assert gc.get_freeze_count() > 10_000
    finally:
        gc.set_threshold(*before)


async def test_a_driver_connection_the_server_dropped_costs_at_most_one_503(
    make_settings, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    """The insert's pooled connection killed on the server (as a database restart does): that
    delivery answers 200 (asyncpg saw the close and reconnected) or 503 (Meta retries), and the
    redelivery is stored, once."""
    pid = wa_tenant.phone_number_id
    first = text_body(phone_number_id=pid, wamid="wamid.DROP0001", text="before")
    second = text_body(phone_number_id=pid, wamid="wamid.DROP0002", text="after")
    async with channel_service(make_settings()) as svc:
        assert (await svc.post(first)).status_code == 200
        driver = svc.app.state.resources.driver
        async with driver.connection() as conn:  # LIFO: the connection the insert just used
            backend = conn.get_server_pid()
        async with sessions() as session:
            await session.execute(sql("SELECT pg_terminate_backend(:p)"), {"p": backend})
            await session.commit()
        await asyncio.sleep(0.2)
        answer = await svc.post(second)
        redelivered = await svc.post(second)
    assert answer.status_code in (200, 503) and redelivered.status_code == 200
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert sorted(r.text for r in rows) == ["after", "before"]


async def test_the_lean_path_answers_what_the_response_object_says(make_settings, wa_tenant) -> None:  # type: ignore[no-untyped-def]
    """The lean path sends the response's head and body itself: status, JSON type and length as
    Starlette's ``Response`` would, for an accepted delivery and for a refused one."""
    body = text_body(phone_number_id=wa_tenant.phone_number_id, wamid="wamid.LEAN0001", text="hi")
    async with channel_service(make_settings()) as svc:
        accepted = await svc.post(body)
        refused = await svc.post(body, signature="sha256=" + "0" * 64)
    assert accepted.status_code == 200 and accepted.headers["content-type"] == "application/json"
    assert int(accepted.headers["content-length"]) == len(accepted.content)
    assert accepted.json() == {
        "status": "ok",
        "stored": 1,
        "duplicates": 0,
        "statuses": 0,
        "unknown_accounts": [],
    }
    assert (refused.status_code, refused.json()) == (403, {"error": "invalid signature"})
