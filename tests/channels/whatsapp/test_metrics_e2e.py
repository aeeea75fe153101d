"""Prometheus ``/metrics`` after driving WhatsApp messages through the real path: the channel service's
scrape shows what the webhook, the worker, the orchestrator and the send did (one process here, one
registry); the chat worker serves the same text on its own metrics port."""

from __future__ import annotations

import asyncio

import httpx
from arq.connections import create_pool
from prometheus_client.parser import text_string_to_metric_families
from switchboard.queue import Queue
from switchboard.worker import WORKER_SETTINGS_BUILDERS

from tests.utils.agent import text, tool_calls
from tests.utils.net import free_port
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


def _samples(body: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def _scrape(svc) -> dict:  # type: ignore[no-untyped-def]
    response = await svc.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


async def test_metrics_count_one_message_from_webhook_to_send(
    e2e_settings, ai_tenant, model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).push(tool_calls(("no_such_tool", {})), text("Here you are."))
    settings = e2e_settings()
    pid = ai_tenant.phone_number_id
    tenant = str(ai_tenant.tenant.id)
    async with channel_service(settings) as svc:
        before = await _scrape(svc)
        assert (
            await svc.post(text_body(phone_number_id=pid, wamid="wamid.METRICS1", text="hi"))
        ).status_code == 200
        assert (
            await svc.post(text_body(phone_number_id=pid, wamid="wamid.X", text="x"), signature="sha256=00")
        ).status_code == 403
        await run_worker_burst(settings)
        after = await _scrape(svc)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["Here you are."]

    def delta(metric: str, **labels: str) -> float:
        return _value(after, metric, **labels) - _value(before, metric, **labels)

    assert delta("switchboard_webhook_acks_total", channel="whatsapp", outcome="accepted") == 1
    assert delta("switchboard_webhook_acks_total", channel="whatsapp", outcome="bad_signature") == 1
    assert delta("switchboard_webhook_ack_seconds_count", channel="whatsapp") == 2
    assert delta("switchboard_jobs_total", queue="arq:queue", job="process_inbound", outcome="ok") == 1
    # one wait per try (a try the orchestrator answered too slowly under load is retried)
    tries = delta("switchboard_job_wait_seconds_count", queue="arq:queue", job="process_inbound")
    assert tries == 1 + delta(
        "switchboard_jobs_total", queue="arq:queue", job="process_inbound", outcome="retry"
    )
    assert delta("switchboard_turns_total", outcome="answered") == 1
    # the deployment and the tenant are this test's own: absolute values
    assert _value(after, "switchboard_model_calls_total", deployment=name, outcome="ok") == 2
    assert _value(after, "switchboard_model_tokens_total", tenant=tenant, model=name, kind="prompt") > 0
    assert _value(after, "switchboard_model_tokens_total", tenant=tenant, model=name, kind="completion") > 0
    assert ("switchboard_model_cost_usd_total", frozenset({"tenant": tenant, "model": name}.items())) in after
    assert _value(after, "switchboard_model_fallbacks_total", deployment=name) == 0
    assert delta("switchboard_tool_calls_total", tool="unknown", outcome="error") == 1
    assert delta("switchboard_sends_total", channel="whatsapp", status="sent") == 1


async def test_a_handoff_is_counted(e2e_settings, ai_tenant, model) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).push(tool_calls(("escalate_to_human", {"reason": "refund"})), text(""))
    settings = e2e_settings()
    async with channel_service(settings) as svc:
        before = await _scrape(svc)
        await svc.post(
            text_body(phone_number_id=ai_tenant.phone_number_id, wamid="wamid.HANDOFF1", text="a person")
        )
        await run_worker_burst(settings)
        after = await _scrape(svc)
    assert (
        _value(after, "switchboard_handoffs_total", actor="ai")
        - _value(before, "switchboard_handoffs_total", actor="ai")
        == 1
    )
    assert _value(after, "switchboard_tool_calls_total", tool="escalate_to_human", outcome="ok") >= 1


async def test_the_chat_worker_serves_metrics_on_its_port(make_settings) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    settings = make_settings(worker_metrics_port=port)
    worker = WORKER_SETTINGS_BUILDERS[Queue.chat](settings)
    ctx = {"redis": await create_pool(worker.redis_settings)}
    try:
        await worker.on_startup(ctx)
        try:
            async with httpx.AsyncClient() as http:
                for _ in range(100):  # the first depth sample is taken right after start-up
                    response = await http.get(f"http://127.0.0.1:{port}/metrics")
                    if "switchboard_queue_depth{" in response.text:
                        break
                    await asyncio.sleep(0.02)
        finally:
            await worker.on_shutdown(ctx)
    finally:
        await ctx["redis"].aclose()
    assert response.status_code == 200
    samples = _samples(response.text)
    assert ("switchboard_queue_depth", frozenset({"queue": "arq:queue"}.items())) in samples
    for name in (
        "switchboard_guardrail_decisions_total",
        "switchboard_feedback_total",
        "switchboard_leads_created_total",
    ):
        assert f"# HELP {name}" in response.text
