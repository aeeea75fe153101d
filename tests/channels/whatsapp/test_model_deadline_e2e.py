"""When the model is slow or down, the customer still hears from us by the tenant's first-reply deadline.

Signed webhook → worker → the session's real orchestrator → the offline model server scripted to hang
or a port that refuses connections → the Graph sandbox. The time is measured from the webhook's post to
the first message the sandbox records for the customer.
"""

from __future__ import annotations

import asyncio
import json
import time

from arq.connections import RedisSettings, create_pool
from sqlmodel import select
from switchboard.analytics import tenant_analytics
from switchboard.crypto import CredentialCipher
from switchboard.db.engine import create_engine, session_factory
from switchboard.db.models import Lead, Message, Outbox, Tenant, Turn
from switchboard.inbound.resume import probe_tenant, resume_tenant
from switchboard.leads.intent import INTENT_INSTRUCTION
from switchboard.llm.health import failing_tenants, tenant_health
from switchboard.llm.router import ModelGateway
from switchboard.queue import Queue
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.agent import answer_with_script, deployment, llm_settings, text, unique_model
from tests.utils.net import free_port
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


async def _use_llm(sessions, tenant_id, llm) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        tenant = await session.get(Tenant, tenant_id)
        tenant.settings_extensions = {
            **tenant.settings_extensions,
            "llm": llm,
            "agent": {"first_reply_deadline_s": DEADLINE_S},
        }
        session.add(tenant)


async def _resume_now(settings, redis, tenant_id) -> int:  # type: ignore[no-untyped-def]
    """What the resume job does for one tenant whose back-off allows a probe: probe, then queue its
    waiting rows. Returns the rows queued."""
    engine = create_engine(settings.database_url)
    try:
        sessions = session_factory(engine)
        cipher = CredentialCipher(settings.secret("encryption_key").encode())
        gateway = ModelGateway(settings=settings, cipher=cipher)
        if not await probe_tenant(sessions, redis, gateway, tenant_id):
            return 0
        return await resume_tenant(sessions, redis, tenant_id)
    finally:
        await engine.dispose()


DEADLINE_S = 3.0
"""The tenant's ``agent.first_reply_deadline_s`` in these tests (the smallest allowed)."""
SLACK_S = 1.5
"""What the first message may take past the deadline: the worker's pick-up and the send."""


async def _first_message_after(settings, sandbox, pid: str, posted_at: float) -> tuple[float, asyncio.Task]:  # type: ignore[no-untyped-def]
    """Run the chat worker until its queue is empty; returns (seconds from ``posted_at`` to the first
    message the customer got, the worker's task)."""
    burst = asyncio.create_task(run_worker_burst(settings))
    while not sent_to(sandbox, pid):
        assert not burst.done() or sent_to(sandbox, pid), "the worker ended and the customer got nothing"
        await asyncio.sleep(0.02)
    return time.monotonic() - posted_at, burst


async def test_a_hanging_model_sends_the_holding_message_once_by_the_deadline_then_parks_the_question(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    script = await answer_with_script(
        sessions,
        wa_tenant.tenant.id,
        offline_model,
        agent={"first_reply_deadline_s": DEADLINE_S},
        loop={"turn_timeout_s": 8},
        guardrails={"input": {"enabled": True}, "output": {"enabled": True}},  # a hanging checker too
    )
    script.default = ScriptedResponse(kind="hang")
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        posted_at = time.monotonic()
        await svc.post(
            text_body(phone_number_id=pid, wamid=f"wamid.H{unique_model()}", text="where is my order?")
        )
    first_s, burst = await _first_message_after(settings, graph_sandbox[1], pid, posted_at)
    await burst
    defaults = AgentSettings()
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [
        defaults.holding_reply,
        defaults.waiting_reply,
    ]
    assert DEADLINE_S - 0.5 <= first_s <= DEADLINE_S + SLACK_S, first_s
    async with sessions() as session:
        purposes = (
            await session.exec(
                select(Outbox.purpose, Outbox.status)
                .where(Outbox.tenant_id == wa_tenant.tenant.id)
                .order_by(Outbox.created_at)
            )
        ).all()
    assert purposes == [("holding", "sent"), ("notice", "sent")]
    async with sessions() as session:
        states = (
            await session.exec(
                select(Message.inbound_state).where(
                    Message.tenant_id == wa_tenant.tenant.id, Message.direction == "inbound"
                )
            )
        ).all()
    assert states == ["waiting_model"]


async def test_the_deadline_counts_from_the_message_not_from_the_workers_pick_up(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    script = await answer_with_script(
        sessions,
        wa_tenant.tenant.id,
        offline_model,
        agent={"first_reply_deadline_s": DEADLINE_S},
        loop={"turn_timeout_s": 8},
    )
    script.default = ScriptedResponse(kind="hang")
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        posted_at = time.monotonic()
        await svc.post(
            text_body(
                phone_number_id=pid, wamid=f"wamid.Q{unique_model()}", text="my order?", wa_id="15550107788"
            )
        )
    await asyncio.sleep(2.0)  # a busy queue: the worker takes the message 2 s after it arrived
    first_s, burst = await _first_message_after(settings, graph_sandbox[1], pid, posted_at)
    await burst
    assert sent_to(graph_sandbox[1], pid)[0]["text"] == AgentSettings().holding_reply
    assert DEADLINE_S - 0.5 <= first_s <= DEADLINE_S + SLACK_S, first_s


async def test_a_spanish_tenant_gets_the_holding_message_in_spanish(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    script = await answer_with_script(
        sessions,
        wa_tenant.tenant.id,
        offline_model,
        agent={"first_reply_deadline_s": DEADLINE_S},
        locale={"language": "es"},
    )
    script.push(text("Tu pedido sale hoy.", latency_s=DEADLINE_S + 1.5))
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.S{unique_model()}", text="¿y mi pedido?"))
    await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [
        "Gracias por su mensaje. Lo estoy revisando y le respondo en un momento.",
        "Tu pedido sale hoy.",
    ]


async def test_an_answer_within_the_deadline_sends_no_holding_message(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    # the deadline counts from the message's arrival: the worker's start in this test counts too
    script = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, agent={"first_reply_deadline_s": 10}
    )
    script.push(text("Right away.", latency_s=0.5))
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.Q{unique_model()}", text="hi"))
    await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["Right away."]


async def test_a_refusing_provider_is_told_at_once_and_the_question_is_answered_when_it_comes_back(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    name = unique_model("comes-back")
    tenant_id = wa_tenant.tenant.id
    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    await _use_llm(sessions, tenant_id, llm_settings(deployment(refused, name)))
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        posted_at = time.monotonic()
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.R{name}", text="hello?"))
    first_s, burst = await _first_message_after(settings, graph_sandbox[1], pid, posted_at)
    await burst
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [AgentSettings().waiting_reply]
    assert first_s < DEADLINE_S, first_s

    redis = await create_pool(RedisSettings.from_dsn(settings.redis_url))
    try:
        (failing,) = await tenant_health(redis, tenant_id)
        assert (failing.deployment, failing.state) == (name, "failing")
        assert str(tenant_id) in await failing_tenants(redis)
        assert await _resume_now(settings, redis, tenant_id) == 0  # still refusing: nothing resumed
        (failing,) = await tenant_health(redis, tenant_id)
        assert (failing.state, failing.probes) == ("failing", 1) and failing.next_probe_at > time.time()

        # the provider is back: the same deployment, now answering
        state.script(name).default = ScriptedResponse(content="Your order ships today.")
        await _use_llm(sessions, tenant_id, llm_settings(deployment(url, name)))
        assert await _resume_now(settings, redis, tenant_id) == 1
        assert await tenant_health(redis, tenant_id) == []
        assert str(tenant_id) not in await failing_tenants(redis)
    finally:
        await redis.aclose()
    await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [
        AgentSettings().waiting_reply,
        "Your order ships today.",
    ]
    asked = [r for r in state.script(name).requests if r["messages"][-1]["content"] == "hello?"]
    assert len(asked) == 1  # the customer's own words reached the model once it answered
    async with sessions() as session:
        outcomes = (await session.exec(select(Turn.outcome).where(Turn.tenant_id == tenant_id))).all()
        figures = await tenant_analytics(session, tenant_id, days=1)
    assert sorted(outcomes) == ["answered", "degraded"]  # the failed turn stays on record
    assert figures.totals["fallback_rate"] == 0.5  # the failed turn is no answer by the first deployment


async def test_the_model_lead_check_runs_in_the_background_and_never_delays_the_reply(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    name = unique_model("provider")
    script = await answer_with_script(
        sessions,
        wa_tenant.tenant.id,
        offline_model,
        name=name,
        leads={"intent_check": "model"},
        agent={"first_reply_deadline_s": 10},
    )
    slow_check_s = 6.0
    verdict = {
        "buying_intent": True,
        "product": "DN50 valve",
        "summary": "Wants ten DN50 valves.",
        "consent": "granted",
    }
    script.push(text("The DN50 is 129 EUR."))
    script.push(text(json.dumps(verdict), latency_s=slow_check_s))  # the intent check: slow
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        posted_at = time.monotonic()
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.L{name}", text="I want ten DN50 valves"))
    first_s, burst = await _first_message_after(settings, graph_sandbox[1], pid, posted_at)
    await burst
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["The DN50 is 129 EUR."]
    assert first_s < slow_check_s - 2, first_s  # the reply did not wait for the check
    assert not [r for r in script.requests if r["messages"][0]["content"] == INTENT_INSTRUCTION]

    await run_worker_burst(settings, Queue.background)  # the check, after the send
    async with sessions() as session:
        (lead,) = (await session.exec(select(Lead).where(Lead.tenant_id == wa_tenant.tenant.id))).all()
    assert (lead.source, lead.detected_by, lead.interest) == ("intent", f"model:{name}", "DN50 valve")
