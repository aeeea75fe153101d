"""The worker on stored rows, without a model: recording, identity, limits, failures, sweeper."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import JSON, event, null, update
from sqlalchemy.engine import Engine
from sqlmodel import select
from switchboard.conversations import Actor
from switchboard.db.models import Conversation, Customer, CustomerIdentity, Message, utcnow
from switchboard.egress import EgressPolicy
from switchboard.handoff import add_agent, escalate
from switchboard.inbound import SLOWDOWN_TEXT
from switchboard.queue import Queue
from switchboard.queue.keys import contract_violation_counter_key, inbound_job_id, inbound_sweep_job_id
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.conversations import assert_human_mode_has_owner, event_rows
from tests.utils.net import TcpProxy
from tests.utils.rows import messages_of
from tests.utils.servers import serve_app
from tests.utils.tenants import new_tenant
from tests.utils.whatsapp import channel_service, connect_whatsapp, load_payload, sent_to, text_body
from tests.utils.workers import job_result, run_cron_job, run_worker_burst, run_workers_until_idle

ECHO_REASON = "a human replied from the WhatsApp Business app"


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
        ("sticker", "done", None),
        ("reaction", "done", None),
        ("unsupported", "done", None),
        ("unsupported", "done", None),
    ]
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
    # nobody is online: it waits in the queue, never in human mode with nobody
    assert (conversation.assigned_agent_id, conversation.escalation_reason) == (
        None,
        ECHO_REASON,
    )
    assert conversation.queued_at is not None
    assert await event_rows(sessions, wa_tenant.tenant.id, conversation.id) == [
        (None, "ai", None, "business_app", None, None),
        ("ai", "human", None, "business_app", None, ECHO_REASON),
    ]
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)
    assert sent_to(graph_sandbox[1], pid) == []


async def test_business_app_echo_goes_to_the_least_loaded_online_agent(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    async with sessions() as session, session.begin():
        nia = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone="15550109999", online=True
        )
        nia.last_inbound_at = utcnow()
    await _post_all(settings, pid, ["smb_message_echo_from_business_app.json"])
    await run_workers_until_idle(settings)
    [row] = await messages_of(sessions, wa_tenant.tenant.id)
    async with sessions() as session:
        conversation = await session.get(Conversation, row.conversation_id)
    assert (conversation.status, conversation.assigned_agent_id, conversation.queued_at) == (
        "human",
        nia.id,
        None,
    )
    [notice] = sent_to(graph_sandbox[1], pid)
    assert notice["to"] == "15550109999"
    assert f"Reason: {ECHO_REASON}" in notice["text"]
    await assert_human_mode_has_owner(sessions, wa_tenant.tenant.id)


async def test_system_number_change_rekeys_customer_keeping_history(
    make_settings, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    await _post_all(
        settings, wa_tenant.phone_number_id, ["sticker_animated.json", "system_user_changed_number.json"]
    )
    await run_workers_until_idle(settings)
    async with sessions() as session:
        customers = list(
            (await session.exec(select(Customer).where(Customer.tenant_id == wa_tenant.tenant.id))).all()
        )
    assert len(customers) == 1
    assert customers[0].phone == "15550100097" and customers[0].profile["previous_phones"] == ["15550100099"]
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert {r.conversation_id for r in rows} == {rows[0].conversation_id} and rows[1].kind == "system"
    async with sessions() as session:
        identities = (
            await session.exec(
                select(CustomerIdentity.value, CustomerIdentity.retired_at.is_(None)).where(  # type: ignore[union-attr]
                    CustomerIdentity.customer_id == customers[0].id
                )
            )
        ).all()
    assert sorted(identities) == [
        ("15550100097", True),
        ("15550100099", False),
        ("US.10000000000000000001", True),
    ]


async def test_recycled_number_is_a_new_customer_and_each_reply_goes_to_its_own_number(
    make_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    # a customer's second message in a burst gets the slow-down reply: a reply without a model
    settings = make_settings(customer_rate_limit=1, inbound_max_tries=1)
    pid = wa_tenant.phone_number_id
    # Ana writes from N1 (a sticker: no reply), then moves to N2
    await _post_all(settings, pid, ["sticker_animated.json", "system_user_changed_number.json"])
    await run_worker_burst(settings)
    senders = [
        ("15550100099", "Bo", ("wamid.BO1", "wamid.BO2")),  # later the carrier gives N1 to Bo
        ("15550100097", "Test Customer", ("wamid.ANA1", "wamid.ANA2")),  # Ana from her new number
    ]
    for wa_id, name, wamids in senders:
        async with channel_service(settings) as svc:
            for wamid in wamids:
                await svc.post(text_body(phone_number_id=pid, wamid=wamid, text="hi", wa_id=wa_id, name=name))
        await run_worker_burst(settings, max_jobs=1)
    assert [(m["to"], m["text"]) for m in sent_to(graph_sandbox[1], pid)] == [
        ("15550100099", SLOWDOWN_TEXT),  # Bo, at the number he wrote from
        ("15550100097", SLOWDOWN_TEXT),  # Ana, at her new number
    ]
    async with sessions() as session:
        ana, bo = (
            await session.exec(
                select(Customer)
                .where(Customer.tenant_id == wa_tenant.tenant.id)
                .order_by(Customer.created_at)
            )
        ).all()
    assert (ana.display_name, ana.phone, ana.profile["previous_phones"]) == (
        "Test Customer",
        "15550100097",
        ["15550100099"],
    )
    assert (bo.display_name, bo.phone, bo.external_user_id) == ("Bo", "15550100099", "15550100099")
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    by_conversation = {}
    for r in rows:
        by_conversation.setdefault(r.conversation_id, []).append(r.external_id)
    assert sorted(by_conversation.values(), key=len) == [
        ["wamid.BO1", "wamid.BO2"],
        [rows[0].external_id, rows[1].external_id, "wamid.ANA1", "wamid.ANA2"],  # Ana's history stays hers
    ]


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
        "15550100099",
        "15550100099",
        "US.10000000000000000001",
    )
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert len(rows) == 3 and len({r.conversation_id for r in rows}) == 1


async def test_orchestrator_down_retries_then_dead_letter(
    make_settings, wa_tenant, sessions, graph_sandbox, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(inbound_max_tries=3)
    await _post_all(settings, wa_tenant.phone_number_id, ["text.json"])
    await run_worker_burst(settings)
    (row,) = await messages_of(sessions, wa_tenant.tenant.id)
    assert (row.inbound_state, row.processing_attempts) == ("dead", 3)
    assert row.last_error.startswith("orchestrator unreachable")
    job = await job_result(arq_pool, inbound_job_id(row.id))  # this row's job: tried three times, then dead
    assert (job.success, job.result, job.job_try) == (True, "dead", 3)
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
    assert graph_sandbox[1].read_marks_of(pid) == ["wamid.RL1"]  # the one message answered is marked read


async def test_human_mode_conversation_is_stored_without_a_turn(make_settings, wa_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    await _post_all(settings, pid, ["sticker_animated.json"])
    await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    async with sessions() as session, session.begin():  # nobody online: it waits in the queue
        await escalate(
            session,
            tenant_id=wa_tenant.tenant.id,
            conversation_id=rows[0].conversation_id,
            reason="r",
            actor=Actor.ai(),
        )
    await _post_all(settings, pid, ["text.json"])
    await run_worker_burst(settings)
    rows = await messages_of(sessions, wa_tenant.tenant.id)
    assert (rows[1].inbound_state, rows[1].last_error, rows[1].conversation_id) == (
        "done",
        None,
        rows[0].conversation_id,
    )


async def test_redis_outage_on_the_webhook_stores_rows_the_sweeper_enqueues_and_dead_letters_after_bound(
    scratch_settings, scratch_database, redis_url, arq_pool, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    # the sweeper scans every tenant's rows: on a database of this test's own it finds exactly these two
    settings = scratch_settings(inbound_sweep_after_s=0.001, inbound_max_sweeps=2)
    sessions = scratch_database.sessions
    tenant = await new_tenant(sessions)
    pid = (await connect_whatsapp(sessions, tenant, settings)).external_account_id
    redis = urlsplit(redis_url)
    async with TcpProxy(redis.hostname, redis.port) as proxy:  # the service reaches Redis through it
        outage = scratch_settings(redis_url=redis_url.replace(f":{redis.port}", f":{proxy.port}"))
        async with channel_service(outage) as svc:
            await proxy.close()  # Redis goes away: its port is closed, the connections drop
            for body in (
                load_payload("sticker_animated.json", phone_number_id=pid),
                text_body(phone_number_id=pid, wamid="wamid.SWEEP-DEAD", text="never processed"),
            ):
                response = await svc.post(body)
                assert (response.status_code, response.json()["stored"]) == (200, 1)  # stored all the same
    assert await arq_pool.zrange(Queue.chat.value, 0, -1) == []  # no job reached the queue
    sticker, stuck = await messages_of(sessions, tenant.id)
    assert (sticker.inbound_state, stuck.inbound_state) == ("pending", "pending")
    async with sessions() as session, session.begin():  # the text was already swept twice
        await session.exec(
            update(Message).where(Message.id == stuck.id).values(raw=Message.raw.op("||")({"sweeps": 2}))
        )
    counts = await run_cron_job(settings, Queue.background, "sweep_inbound")
    assert counts == {"requeued": 1, "dead": 1, "live": 0}
    assert await arq_pool.zrange(Queue.chat.value, 0, -1) == [inbound_sweep_job_id(sticker.id, 1).encode()]
    await run_worker_burst(settings)
    assert (await job_result(arq_pool, inbound_sweep_job_id(sticker.id, 1))).result == "recorded"
    rows = {r.id: r for r in await messages_of(sessions, tenant.id)}
    assert (rows[sticker.id].inbound_state, rows[sticker.id].raw["sweeps"]) == ("done", 1)
    assert (rows[stuck.id].inbound_state, rows[stuck.id].last_error) == ("dead", "dead letter after 2 sweeps")
    assert sent_to(graph_sandbox[1], pid) == []


@pytest.mark.parametrize("raw", [None, "json-null", ["not", "an", "object"]])
async def test_a_row_without_an_object_raw_still_reaches_the_dead_letter(
    scratch_settings, scratch_database, arq_pool, raw
) -> None:  # type: ignore[no-untyped-def]
    settings = scratch_settings(inbound_sweep_after_s=0.001, inbound_max_sweeps=1)
    sessions = scratch_database.sessions
    tenant = await new_tenant(sessions)
    account = await connect_whatsapp(sessions, tenant, settings)
    stored = null() if raw is None else (JSON.NULL if raw == "json-null" else raw)
    async with sessions() as session, session.begin():
        row = Message(
            tenant_id=tenant.id,
            channel="whatsapp",
            channel_account_id=account.id,
            direction="inbound",
            role="user",
            kind="text",
            text="stuck",
            external_id="wamid.RAWLESS",
            sender_external_id="15550100077",
            inbound_state="pending",
            processing_attempts=0,
        )
        session.add(row)
        await session.flush()
        await session.exec(update(Message).where(Message.id == row.id).values(raw=stored))
    assert await run_cron_job(settings, Queue.background, "sweep_inbound") == {
        "requeued": 1,
        "dead": 0,
        "live": 0,
    }
    (swept,) = await messages_of(sessions, tenant.id)
    expected = {"sweeps": 1} if raw in (None, "json-null") else {"original": raw, "sweeps": 1}
    assert swept.raw == expected
    await arq_pool.delete(f"arq:job:{inbound_sweep_job_id(row.id, 1)}")  # the job was lost
    await arq_pool.zrem(Queue.chat.value, inbound_sweep_job_id(row.id, 1))
    assert await run_cron_job(settings, Queue.background, "sweep_inbound") == {
        "requeued": 0,
        "dead": 1,
        "live": 0,
    }
    (dead,) = await messages_of(sessions, tenant.id)
    assert (dead.inbound_state, dead.last_error) == ("dead", "dead letter after 1 sweeps")


async def test_missing_row_job_is_a_no_op(make_settings, arq_pool) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    job = await arq_pool.enqueue_job("process_inbound", str(uuid.uuid4()), _job_id=f"inbound:{uuid.uuid4()}")
    await run_worker_burst(settings)
    assert await job.result(timeout=5) == "missing_or_finished"


async def test_a_spanish_tenant_with_its_own_limit_gets_the_spanish_slow_down(
    make_settings, make_tenant, sessions, settings, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    # the process allows 10 per window; the tenant's own rate_limits allow 1
    tenant = await make_tenant(locale={"language": "es"}, rate_limits={"customer_rate_limit": 1})
    account = await connect_whatsapp(sessions, tenant, settings)
    pid = account.external_account_id
    run_settings = make_settings(inbound_max_tries=1)
    async with channel_service(run_settings) as svc:
        for i in range(3):
            await svc.post(
                text_body(phone_number_id=pid, wamid=f"wamid.ES{i}.{uuid.uuid4().hex}", text=f"hola {i}")
            )
    await run_worker_burst(run_settings, max_jobs=1)
    sent = sent_to(graph_sandbox[1], pid)
    assert [m["text"] for m in sent] == [
        "Está enviando mensajes más rápido de lo que podemos responderlos. Por favor, vaya un poco más "
        "despacio; responderemos a su último mensaje en breve."
    ]


def _orchestrator_that_escalates(database_url: str, actor: Actor, reply: str, calls: list[dict]) -> FastAPI:
    """An orchestrator stand-in whose turn hands the conversation to a person as ``actor`` (through the
    real lifecycle, as a console takeover or the model's own escalation would) before it answers."""
    from switchboard.db.engine import create_engine, session_factory

    app = FastAPI()

    @app.post("/v1/turns")
    async def turns(body: dict) -> JSONResponse:
        calls.append(body)
        engine = create_engine(database_url)
        try:
            async with session_factory(engine)() as session, session.begin():
                await escalate(
                    session,
                    tenant_id=uuid.UUID(body["tenant_id"]),
                    conversation_id=uuid.UUID(body["conversation_id"]),
                    reason="during the turn",
                    actor=actor,
                )
        finally:
            await engine.dispose()
        return JSONResponse({"reply": reply, "silent": False, "trace_id": "t" * 32})

    @app.get("/healthz")
    async def healthz() -> dict:
        return {}

    return app


@pytest.mark.parametrize(
    ("actor", "dropped"), [(Actor.api(), True), (Actor.ai(), False)], ids=["person", "the_ai_itself"]
)
async def test_a_takeover_by_a_person_during_the_turn_drops_the_reply_but_the_ais_own_escalation_does_not(
    make_settings, wa_tenant, sessions, graph_sandbox, actor, dropped
) -> None:  # type: ignore[no-untyped-def]
    """The worker reads the status and who set it (``conversations.status_actor_type``) from one row."""
    settings = make_settings()
    pid = wa_tenant.phone_number_id
    reply = "A person will take over from here."
    calls: list[dict] = []
    async with serve_app(_orchestrator_that_escalates(settings.database_url, actor, reply, calls)) as url:
        settings = make_settings(orchestrator_port=int(url.rsplit(":", 1)[1]))
        await _post_all(settings, pid, ["text.json"])
        await run_worker_burst(settings)
    (row,) = await messages_of(sessions, wa_tenant.tenant.id)
    async with sessions() as session:
        conversation = await session.get(Conversation, row.conversation_id)
    assert len(calls) == 1 and row.inbound_state == "done"
    assert (conversation.status, conversation.status_actor_type) == ("human", actor.type.value)
    if dropped:
        assert row.last_error == "taken over by a person during the turn: reply not sent"
        assert sent_to(graph_sandbox[1], pid) == []
    else:
        assert row.last_error is None
        assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [reply]


async def test_message_created_carries_the_conversation_and_only_for_a_subscribed_tenant(
    make_settings, wa_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    """The webhook writes no event; the worker's claim writes ``message.created`` once, with the
    conversation, and only for a tenant with an active endpoint that takes it."""
    from switchboard.crypto import CredentialCipher
    from switchboard.db.models import EventOutbox
    from switchboard.events.endpoints import create_endpoint

    settings = make_settings()
    pid = wa_tenant.phone_number_id
    tenant_id = wa_tenant.tenant.id

    async def created_events() -> list[EventOutbox]:
        async with sessions() as session:
            rows = await session.exec(
                select(EventOutbox).where(
                    EventOutbox.tenant_id == tenant_id, EventOutbox.event_type == "message.created"
                )
            )
            return list(rows.all())

    # no endpoint: nothing, neither at the webhook nor in the worker
    await _post_all(settings, pid, ["text_reply_with_context.json"])
    assert await created_events() == []
    await run_worker_burst(settings)
    assert await created_events() == []

    # an endpoint for other events only: still nothing
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    async with sessions() as session, session.begin():
        leads, _ = await create_endpoint(
            session,
            tenant_id=tenant_id,
            url="http://127.0.0.1:9/hook",
            event_types=["lead.created"],
            description="crm",
            cipher=cipher,
            egress=EgressPolicy(allow_loopback=True),
        )
    async with channel_service(settings) as svc:
        assert (
            await svc.post(
                text_body(phone_number_id=pid, wamid=f"wamid.EVT2{uuid.uuid4().hex}", text="second")
            )
        ).status_code == 200
    await run_worker_burst(settings)
    assert await created_events() == []

    # subscribed: one event per stored customer message, carrying its conversation; a redelivery adds none
    async with sessions() as session, session.begin():
        await create_endpoint(
            session,
            tenant_id=tenant_id,
            url="http://127.0.0.1:9/messages",
            event_types=["message.created"],
            description="crm",
            cipher=cipher,
            egress=EgressPolicy(allow_loopback=True),
        )
    async with channel_service(settings) as svc:
        body = text_body(phone_number_id=pid, wamid=f"wamid.EVT3{uuid.uuid4().hex}", text="third")
        assert (await svc.post(body)).status_code == 200
        assert await created_events() == []  # not at webhook time
        assert (await svc.post(body)).status_code == 200  # a redelivery
    await run_worker_burst(settings)
    [event] = await created_events()
    row = next(r for r in await messages_of(sessions, tenant_id) if r.text == "third")
    assert row.conversation_id is not None
    assert event.payload["data"] == {
        "message_id": str(row.id),
        "conversation_id": str(row.conversation_id),
        "channel": "whatsapp",
        "direction": "inbound",
        "role": "user",
        "kind": "text",
        "text": "third",
    }
    assert leads.id is not None

    # a human agent's own message from their phone (a slash command) is not a customer's: no event
    async with sessions() as session, session.begin():
        await add_agent(session, tenant_id=tenant_id, name="Nia", phone="15550107777", online=True)
    async with channel_service(settings) as svc:
        body = text_body(
            phone_number_id=pid,
            wamid=f"wamid.EVT4{uuid.uuid4().hex}",
            text="/help",
            wa_id="15550107777",
            name="Nia",
        )
        assert (await svc.post(body)).status_code == 200
    await run_worker_burst(settings)
    assert len(await created_events()) == 1


async def test_the_sweeper_by_default_requeues_a_row_a_redis_outage_left_unqueued_after_20_s(
    scratch_settings, scratch_database, arq_pool
) -> None:  # type: ignore[no-untyped-def]
    # faults.py redis_restart: a webhook acknowledged while Redis is down has a stored row and no job;
    # the sweeper is its only way to an answer, and must pick it up well inside 45 s after the outage
    settings = scratch_settings()
    assert settings.inbound_sweep_after_s == 20.0
    sessions = scratch_database.sessions
    tenant = await new_tenant(sessions)
    account = await connect_whatsapp(sessions, tenant, settings)
    ids = {}
    async with sessions() as session, session.begin():
        for name, age_s in (("fresh", 5), ("outage", 25)):
            row = Message(
                tenant_id=tenant.id,
                channel="whatsapp",
                channel_account_id=account.id,
                direction="inbound",
                role="user",
                kind="text",
                text=name,
                external_id=f"wamid.{name}",
                sender_external_id="15550100078",
                inbound_state="pending",
                processing_attempts=0,
                raw={},
                created_at=utcnow() - timedelta(seconds=age_s),
            )
            session.add(row)
            await session.flush()
            ids[name] = row.id
    counts = await run_cron_job(settings, Queue.background, "sweep_inbound")
    assert counts == {"requeued": 1, "dead": 0, "live": 0}  # the 5 s old row may still be on its way
    assert await arq_pool.zrange(Queue.chat.value, 0, -1) == [inbound_sweep_job_id(ids["outage"], 1).encode()]
    await arq_pool.delete(f"arq:job:{inbound_sweep_job_id(ids['outage'], 1)}")  # not run here
    await arq_pool.zrem(Queue.chat.value, inbound_sweep_job_id(ids["outage"], 1))


async def test_a_text_turn_reads_the_tenant_the_reply_check_and_the_due_parts_once_each(
    e2e_settings, wa_tenant, graph_sandbox, script
) -> None:  # type: ignore[no-untyped-def]
    """The worker's statements for one plain text turn (the orchestrator's, in its own thread, left out):
    each step used to open a session of its own for the same tenant row and the same "is the reply
    written?" check, the reply went out in two delivery passes, and the claim read the channel account
    apart from the row."""
    model = await script()
    model.push(ScriptedResponse(content="We open at 9."))
    settings, pid = e2e_settings(), wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        body = text_body(phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="When do you open?")
        assert (await svc.post(body)).status_code == 200
    worker_thread, statements = threading.get_ident(), []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if threading.get_ident() == worker_thread:
            statements.append(" ".join(statement.split()))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        await run_worker_burst(settings)
    finally:
        event.remove(Engine, "before_cursor_execute", record)

    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["We open at 9."]
    tenant_reads = [s for s in statements if s.startswith("SELECT tenants.")]
    reply_checks = [
        s for s in statements if s.startswith("SELECT outbox.id FROM outbox WHERE outbox.inbound_message_id")
    ]
    due_reads = [
        s
        for s in statements
        if s.startswith("SELECT outbox.id, outbox.tenant_id") and "FOR UPDATE SKIP LOCKED" in s
    ]
    # the claim reads the row with its account (a join); the delivery reads the account once more
    account_reads = [s for s in statements if s.startswith("SELECT channel_accounts.")]
    assert (len(tenant_reads), len(reply_checks), len(due_reads), len(account_reads)) == (1, 1, 1, 1)
