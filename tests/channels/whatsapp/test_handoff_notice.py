"""A handoff never makes the customer wait for the agent's summary: with the model hanging, the customer's
message goes out as soon as the turn is written, and the agent's notice (a background job) arrives with
the customer's messages quoted once the summary call fails.

Signed webhook → chat worker → the session's orchestrator → the offline model server (scripted to hang
after the turn's own calls) → the Graph sandbox; then the background worker writes the notice and the
chat worker sends it.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from redis import Redis
from switchboard.db.models import utcnow
from switchboard.handoff import HANDOFF_SUMMARY_INSTRUCTION, add_agent
from switchboard.queue import Queue
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.agent import answer_with_script
from tests.utils.handoff import random_phone
from tests.utils.whatsapp import channel_service, load_payload, sent_to, text_body
from tests.utils.workers import queued_jobs, run_worker_burst, run_workers_until_idle

CUSTOMER = "15550100099"
REQUEST_TIMEOUT_S = 3.0
"""The tenant's ``llm.request_timeout_s``: how long the hanging summary call holds its job."""


async def _online_agent(sessions, wa_tenant):  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        agent = await add_agent(
            session, tenant_id=wa_tenant.tenant.id, name="Nia", phone=random_phone(), online=True
        )
        agent.last_inbound_at = utcnow() - timedelta(minutes=5)
    return agent


async def _customer_side(settings, body) -> float:  # type: ignore[no-untyped-def]
    """Post ``body`` and run the chat worker until its queue is empty; returns the seconds it took."""
    started = time.monotonic()
    async with channel_service(settings) as svc:
        assert (await svc.post(body)).status_code == 200
    await run_worker_burst(settings)
    return time.monotonic() - started


def _background_jobs(settings) -> list[str]:  # type: ignore[no-untyped-def]
    client = Redis.from_url(settings.redis_url)
    try:
        return queued_jobs(client, Queue.background.value)
    finally:
        client.close()


async def test_an_escalation_in_a_turn_answers_the_customer_at_once_and_the_notice_follows_with_a_quoted_summary(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    model = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, policy={"request_timeout_s": REQUEST_TIMEOUT_S}
    )
    model.push(
        ScriptedResponse(
            kind="tool_calls",
            tool_calls=[{"name": "escalate_to_human", "arguments": {"reason": "wants a refund"}}],
        ),
        ScriptedResponse(content="A colleague will take over here."),
    )
    model.default = ScriptedResponse(kind="hang")  # the summary call never answers
    nia = await _online_agent(sessions, wa_tenant)
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    body = text_body(
        phone_number_id=pid, wamid=f"wamid.{uuid.uuid4().hex}", text="My mug arrived broken", wa_id=CUSTOMER
    )

    took_s = await _customer_side(settings, body)
    assert [(m["to"], m["text"]) for m in sent_to(graph_sandbox[1], pid)] == [
        (CUSTOMER, "A colleague will take over here.")
    ]
    assert took_s < REQUEST_TIMEOUT_S, took_s  # nothing of the turn waited for the hanging call
    assert [job.split(":")[0] for job in _background_jobs(settings)] == ["handoff-notice"]

    await run_workers_until_idle(settings)
    notice = sent_to(graph_sandbox[1], pid)[1]
    assert notice["to"] == nia.phone
    assert "Reason: wants a refund" in notice["text"]
    assert "Summary: Customer: My mug arrived broken" in notice["text"]
    assert model.requests[-1]["messages"][0] == {"role": "system", "content": HANDOFF_SUMMARY_INSTRUCTION}


async def test_the_talk_to_a_person_button_answers_at_once_and_the_notice_follows(
    e2e_settings, wa_tenant, sessions, graph_sandbox, offline_model
) -> None:  # type: ignore[no-untyped-def]
    model = await answer_with_script(
        sessions, wa_tenant.tenant.id, offline_model, policy={"request_timeout_s": REQUEST_TIMEOUT_S}
    )
    model.default = ScriptedResponse(kind="hang")
    nia = await _online_agent(sessions, wa_tenant)
    settings = e2e_settings()
    pid = wa_tenant.phone_number_id
    body = load_payload("interactive_button_reply.json", phone_number_id=pid)
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    message["id"] = f"{message['id']}.{uuid.uuid4().hex}"

    took_s = await _customer_side(settings, body)
    sent = sent_to(graph_sandbox[1], pid)
    assert [m["text"] for m in sent] == [AgentSettings().handoff_reply]
    assert took_s < REQUEST_TIMEOUT_S, took_s
    assert model.requests == []  # no model call before the customer's answer

    await run_workers_until_idle(settings)
    notice = sent_to(graph_sandbox[1], pid)[1]
    assert notice["to"] == nia.phone
    assert "Reason: customer pressed Talk to a person" in notice["text"]
    assert "Summary: Customer: Talk to a person" in notice["text"]
