"""The worker on stored rows, without a model: recording, identity, limits, failures, sweeper."""

from __future__ import annotations

import uuid

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import update
from sqlmodel import select
from switchboard.db.models import Conversation, Customer, Message
from switchboard.inbound import SLOWDOWN_TEXT
from switchboard.queue import build_worker_settings
from switchboard.queue.keys import contract_violation_counter_key
from switchboard.queue.maintenance import sweep_inbound

from tests.channels.whatsapp.conftest import channel_service, messages_of, run_worker_burst, sent_to
from tests.utils.servers import serve_app
from tests.utils.whatsapp import load_payload, text_body


async def _post_all(settings, pid: str, names: list[str]) -> None:  # type: ignore[no-untyped-def]
    async with channel_service(settings) as svc:
        for name in names:
            assert (await svc.post(load_payload(name, phone_number_id=pid))).status_code == 200


async def test_record_only_events_never_wake_the_agent(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    await _post_all(
        settings,
        pid,
        [
            "sticker_animated.json",
            "reaction.json",
            "unsupported_type.json",
            "interactive_missing_payload.json",
        ],
    )
    await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert [(r.kind, r.inbound_state, r.last_error) for r in rows] == [
        ("sticker", "done", None), ("reaction", "done", None), ("unsupported", "done", None), ("unsupported", "done", None),
    ]  # fmt: skip
    assert len({r.conversation_id for r in rows}) == 1 and rows[0].conversation_id is not None
    assert sent_to(graph_sandbox[1], pid) == []


async def test_business_app_echo_hands_over_to_human_and_customer_is_then_not_answered(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    await _post_all(settings, pid, ["smb_message_echo_from_business_app.json"])
    await run_worker_burst(settings)
    await _post_all(settings, pid, ["text_reply_with_context.json"])
    await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert [(r.direction, r.role, r.inbound_state) for r in rows] == [
        ("outbound", "human_agent", "done"),
        ("inbound", "user", "done"),
    ]
    async with sessions() as session:
        conversation = await session.get(Conversation, rows[0].conversation_id)
    assert conversation.status == "human" and rows[1].conversation_id == conversation.id
    assert sent_to(graph_sandbox[1], pid) == []


async def test_system_number_change_rekeys_customer_keeping_history(
    make_settings, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    await _post_all(
        settings, wa_tenant.phone_number_id, ["sticker_animated.json", "system_user_changed_number.json"]
    )
    await run_worker_burst(settings)
    async with sessions() as session:
        customers = list(
            (await session.exec(select(Customer).where(Customer.tenant_id == wa_tenant.tenant.id))).all()
        )
    assert len(customers) == 1
    assert customers[0].phone == "15550100097" and customers[0].profile["previous_phones"] == ["15550100099"]
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert {r.conversation_id for r in rows} == {rows[0].conversation_id} and rows[1].kind == "system"


async def test_phone_and_bsuid_shapes_reach_one_customer_and_conversation(
    make_settings, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(
        inbound_max_tries=1
    )  # orchestrator unreachable: rows end dead, but are attached first
    names = ["text.json", "image_with_caption.json", "text_from_username_user_phone_withheld.json"]
    for name in names:
        await _post_all(settings, wa_tenant.phone_number_id, [name])
        await run_worker_burst(settings)
    async with sessions() as session:
        customers = list(
            (await session.exec(select(Customer).where(Customer.tenant_id == wa_tenant.tenant.id))).all()
        )
    assert len(customers) == 1
    customer = customers[0]
    assert (customer.external_user_id, customer.phone, customer.profile["whatsapp_bsuid"]) == (
        "15550100099", "15550100099", "US.10000000000000000001",
    )  # fmt: skip
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert len(rows) == 3 and len({r.conversation_id for r in rows}) == 1


async def test_orchestrator_down_retries_then_dead_letter(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(inbound_max_tries=3)
    await _post_all(settings, wa_tenant.phone_number_id, ["text.json"])
    worker = await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert rows[0].inbound_state == "dead" and rows[0].processing_attempts == 3
    assert "orchestrator unreachable" in rows[0].last_error
    assert worker.jobs_retried == 2 and worker.jobs_failed == 0
    assert sent_to(graph_sandbox[1], wa_tenant.phone_number_id) == []


async def test_orchestrator_garbage_is_retried_then_contract_violation(
    make_settings, wa_tenant, sessions, arq_pool, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    broken = FastAPI()
    calls: list[dict] = []

    @broken.post("/v1/turns")
    async def turns(body: dict) -> JSONResponse:
        calls.append(body)
        return JSONResponse({"reply": "", "silent": False, "trace_id": "t"})

    @broken.get("/healthz")
    async def healthz() -> dict:
        return {}

    before = int(await arq_pool.get(contract_violation_counter_key()) or 0)
    with serve_app(broken) as url:
        settings = make_settings(orchestrator_port=int(url.rsplit(":", 1)[1]))
        await _post_all(settings, wa_tenant.phone_number_id, ["referral_click_to_whatsapp_ad.json"])
        await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert rows[0].inbound_state == "done" and rows[0].last_error.startswith("contract_violation")
    assert len(calls) == 3 and calls[0]["text"] == "Can I get more info on this?"
    assert calls[0]["inbound_message_id"] == str(rows[0].id)
    assert int(await arq_pool.get(contract_violation_counter_key())) - before == 3
    assert sent_to(graph_sandbox[1], wa_tenant.phone_number_id) == []


async def test_customer_limit_sends_one_polite_reply_then_silence(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(customer_rate_limit=1, inbound_max_tries=1)
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        for i in range(4):
            await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.RL{i}", text=f"msg {i}"))
    await run_worker_burst(settings, max_jobs=1)  # one job at a time: arrival order
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    outcomes = [r.last_error for r in rows]
    assert outcomes[0] == "coalesced into a newer message's turn"
    assert outcomes[1] == "customer rate limit: slow-down reply sent"
    assert outcomes[2:] == ["customer rate limit: not answered"] * 2
    sent = sent_to(graph_sandbox[1], pid)
    assert [(m["to"], m["text"]) for m in sent] == [("15550100099", SLOWDOWN_TEXT)]
    assert graph_sandbox[1].read_marks[-1] == "wamid.RL1"


async def test_human_mode_conversation_is_stored_without_a_turn(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    await _post_all(settings, pid, ["sticker_animated.json"])
    await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    async with sessions() as session, session.begin():
        await session.execute(
            update(Conversation).where(Conversation.id == rows[0].conversation_id).values(status="human")
        )
    await _post_all(settings, pid, ["text.json"])
    await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert (rows[1].inbound_state, rows[1].last_error, rows[1].conversation_id) == (
        "done",
        None,
        rows[0].conversation_id,
    )


async def test_sweeper_requeues_lost_rows_and_dead_letters_after_bound(
    make_settings, wa_tenant, sessions, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(inbound_sweep_after_s=0.001, inbound_max_sweeps=2)
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        pool = svc.app.state.resources.redis
        svc.app.state.resources.redis = None  # enqueue lost
        await svc.post(load_payload("sticker_animated.json", phone_number_id=pid))
        await svc.post(text_body(phone_number_id=pid, wamid="wamid.SWEEP-DEAD", text="never processed"))
        svc.app.state.resources.redis = pool
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    sticker, stuck = rows
    async with sessions() as session, session.begin():
        await session.execute(
            update(Message).where(Message.id == stuck.id).values(raw=Message.raw.op("||")({"sweeps": 2}))
        )
    cls = build_worker_settings(settings)
    ctx: dict = {"redis": arq_pool}
    await cls.on_startup(ctx)
    try:
        counts = await sweep_inbound(ctx)
    finally:
        await cls.on_shutdown(ctx)
    assert counts["requeued"] >= 1 and counts["dead"] >= 1
    await run_worker_burst(settings)
    rows = {r.id: r for r in await messages_of(sessions, wa_tenant.tenant.id)}
    assert rows[sticker.id].inbound_state == "done" and rows[sticker.id].raw["sweeps"] == 1
    assert (
        rows[stuck.id].inbound_state == "dead" and rows[stuck.id].last_error == "dead letter after 2 sweeps"
    )


async def test_missing_row_job_is_a_no_op(make_settings, arq_pool) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    job = await arq_pool.enqueue_job("process_inbound", str(uuid.uuid4()), _job_id=f"inbound:{uuid.uuid4()}")
    await run_worker_burst(settings)
    assert await job.result(timeout=5) == "missing_or_finished"
