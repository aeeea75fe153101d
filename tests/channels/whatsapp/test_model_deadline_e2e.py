"""When the model is slow or down, the customer still hears from us by the tenant's first-reply deadline.

Signed webhook → worker → the session's real orchestrator → the offline model server scripted to hang
or a port that refuses connections → the Graph sandbox. The time is measured from the webhook's post to
the first message the sandbox records for the customer.
"""

from __future__ import annotations

import asyncio
import json
import time

from sqlmodel import select
from switchboard.db.models import Lead, Outbox
from switchboard.leads.intent import INTENT_INSTRUCTION
from switchboard.llm.offline_server import ScriptedResponse
from switchboard.queue import Queue
from switchboard.tenant_settings import AgentSettings

from tests.utils.agent import answer_with_script, deployment, llm_settings, text, unique_model
from tests.utils.net import free_port
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst

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


async def test_a_hanging_model_sends_the_holding_message_once_by_the_deadline_then_the_apology(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    script = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model,
        agent={"first_reply_deadline_s": DEADLINE_S},
        loop={"turn_timeout_s": 8},
        guardrails={"input": {"enabled": True}, "output": {"enabled": True}},  # a hanging checker too
    )  # fmt: skip
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
        defaults.error_reply,
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
    assert purposes == [("holding", "sent"), ("reply", "sent")]


async def test_a_spanish_tenant_gets_the_holding_message_in_spanish(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    script = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, agent={"first_reply_deadline_s": DEADLINE_S},
        locale={"language": "es"},
    )  # fmt: skip
    script.push(text("Tu pedido sale hoy.", latency_s=DEADLINE_S + 1.5))
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.S{unique_model()}", text="¿y mi pedido?"))
    await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [
        "Gracias por tu mensaje. Lo estoy revisando y te respondo en un momento.",
        "Tu pedido sale hoy.",
    ]


async def test_an_answer_within_the_deadline_sends_no_holding_message(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    script = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, agent={"first_reply_deadline_s": DEADLINE_S}
    )
    script.push(text("Right away.", latency_s=0.5))
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.Q{unique_model()}", text="hi"))
    await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["Right away."]


async def test_a_refusing_provider_answers_with_the_apology_before_the_deadline(
    e2e_settings, wa_tenant, sessions, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    async with sessions() as session, session.begin():
        from switchboard.db.models import Tenant

        tenant = await session.get(Tenant, wa_tenant.tenant.id)
        tenant.settings_extensions = {
            **tenant.settings_extensions,
            "llm": llm_settings(deployment(refused, unique_model("refused"))),
            "agent": {"first_reply_deadline_s": DEADLINE_S},
        }
        session.add(tenant)
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    async with channel_service(settings) as svc:
        posted_at = time.monotonic()
        await svc.post(text_body(phone_number_id=pid, wamid=f"wamid.R{unique_model()}", text="hello?"))
    first_s, burst = await _first_message_after(settings, graph_sandbox[1], pid, posted_at)
    await burst
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == [AgentSettings().error_reply]
    assert first_s < DEADLINE_S, first_s


async def test_the_model_lead_check_runs_in_the_background_and_never_delays_the_reply(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    state, url = offline_model
    name = unique_model("provider")
    script = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, name=name,
        leads={"intent_check": "model"}, agent={"first_reply_deadline_s": 10},
    )  # fmt: skip
    slow_check_s = 6.0
    verdict = {"buying_intent": True, "product": "DN50 valve", "summary": "Wants ten DN50 valves.",
               "consent": "granted"}  # fmt: skip
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
