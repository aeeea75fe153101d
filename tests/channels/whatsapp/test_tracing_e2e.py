"""One WhatsApp message traced end to end with the in-memory span exporter: webhook → stored → job →
turn → model calls → an MCP tool call (``traceparent`` over HTTP) → the send.

Everything runs for real in this process (the WhatsApp app, a burst worker, the orchestrator and the
MCP tool server under uvicorn in threads); only the model (the offline server) and Meta's Graph API
(the sandbox) stand in for what is outside.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from switchboard.observability import tracing
from switchboard.seed import seed_demo_business
from switchboard.tools.server import create_tools_app

from tests.utils.agent import answer_with_script, text, tool_calls, unique_model
from tests.utils.net import free_port
from tests.utils.rows import messages_of
from tests.utils.servers import serve_app, serve_orchestrator
from tests.utils.whatsapp import channel_service, sent_to, text_body
from tests.utils.workers import run_worker_burst


def _one(finished: list[ReadableSpan], name: str, **attributes: Any) -> ReadableSpan:
    found = [
        s
        for s in finished
        if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attributes.items())
    ]
    assert len(found) == 1, f"{name} {attributes}: {[(s.name, dict(s.attributes or {})) for s in found]}"
    return found[0]


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names: list[str] = []
    while (parent := _parent(span)) is not None and parent in by_id:
        span = by_id[parent]
        names.append(span.name)
    return names


async def test_one_whatsapp_message_is_one_span_tree_from_webhook_to_send(
    spans, make_settings, wa_tenant, sessions, offline_model, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        await seed_demo_business(session, wa_tenant.tenant.id)
    name = unique_model("trace")
    script = await answer_with_script(sessions, wa_tenant.tenant.id, offline_model, name=name)
    script.push(tool_calls(("check_order_status", {"order_number": "A-1001"})), text("It is on its way."))
    # a cold first turn (MCP discovery, a tool call) may take longer than the suite's 5 s worker timeout
    settings = make_settings(
        orchestrator_port=free_port(), mcp_tools_port=free_port(), orchestrator_timeout_s=60.0
    )
    pid = wa_tenant.phone_number_id
    async with (
        serve_app(create_tools_app(settings), port=settings.mcp_tools_port),
        serve_orchestrator(settings),
        channel_service(settings) as svc,
    ):
        response = await svc.post(
            text_body(phone_number_id=pid, wamid="wamid.TRACE1", text="where is A-1001?")
        )
        assert response.status_code == 200
        await run_worker_burst(settings)
    assert [m["text"] for m in sent_to(graph_sandbox[1], pid)] == ["It is on its way."]
    (row,) = [r for r in await messages_of(sessions, wa_tenant.tenant.id) if r.direction == "inbound"]
    assert row.trace_id

    finished = list(spans.get_finished_spans())
    by_id = {s.context.span_id: s for s in finished}

    # the webhook's trace: request → ingest → store, and the job it enqueued (traceparent in the kwargs)
    webhook = _one(finished, "POST /webhooks/whatsapp")
    assert webhook.kind is SpanKind.SERVER
    ingest = _one(finished, "inbound.ingest", channel="whatsapp")
    store = _one(finished, "inbound.store", channel="whatsapp")
    jobs = [s for s in finished if s.name == "job process_inbound"]  # a busy try is retried: one span each
    assert jobs and [s.attributes["job.outcome"] for s in jobs][-1] == "ok"
    assert {_parent(s) for s in jobs} == {ingest.context.span_id}
    assert (_parent(ingest), _parent(store)) == (webhook.context.span_id, ingest.context.span_id)
    traces = {ingest.context.trace_id, store.context.trace_id, *(s.context.trace_id for s in jobs)}
    assert traces == {webhook.context.trace_id}
    assert (ingest.attributes["stored"], jobs[0].kind) == (1, SpanKind.CONSUMER)

    # the message's trace: its id is the message's trace_id, its root linked to the job that opened it
    trace_id = int(row.trace_id, 16)
    messages = [s for s in finished if s.name == "inbound.message"]
    (message,) = [s for s in messages if s.parent is None]
    assert (message.context.trace_id, message.context.span_id) == (
        trace_id,
        tracing.root_span_id(row.trace_id),
    )
    assert [link.context.span_id for link in message.links] in [[s.context.span_id] for s in jobs]
    assert message.attributes["inbound_message.id"] == str(row.id)
    # a later try of the same message is a child of that root, never a second span with its id
    assert all(_parent(s) == message.context.span_id for s in messages if s is not message)
    assert [s.attributes.get("inbound.outcome") for s in messages][-1] == "replied"

    turn = _one(finished, "agent.turn")
    assert turn.context.trace_id == trace_id
    # worker → orchestrator over HTTP: the httpx client span, then the orchestrator's server span
    assert _ancestors(turn, by_id)[:3] == ["POST /v1/turns", "POST", "inbound.message"]
    assert (turn.attributes["turn.outcome"], turn.attributes["inbound_message.id"]) == (
        "answered",
        str(row.id),
    )

    model_calls = sorted((s for s in finished if s.name == "llm.call"), key=lambda s: s.start_time or 0)
    assert [
        (_parent(s), s.attributes["llm.deployment"], s.attributes["llm.fallback"]) for s in model_calls
    ] == [
        (turn.context.span_id, name, False),
        (turn.context.span_id, name, False),
    ]
    assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in model_calls)
    assert [s.attributes["llm.tool_calls"] for s in model_calls] == [1, 0]

    tool = _one(finished, "tool.call", **{"tool.name": "check_order_status"})
    assert (_parent(tool), tool.context.trace_id) == (turn.context.span_id, trace_id)
    # the MCP server's span is in the same trace, under the tool call (traceparent over HTTP)
    # the tool server's spans (the HTTP request, the MCP SDK's own tools/call span) are in the same
    # trace, under the tool call: traceparent went over HTTP
    mcp = _one(finished, "tools/call check_order_status")
    assert (mcp.kind, mcp.context.trace_id) == (SpanKind.SERVER, trace_id)
    assert "tool.call" in _ancestors(mcp, by_id)

    send = _one(finished, "outbox.send")
    assert (send.context.trace_id, send.attributes["channel"], send.attributes["send.status"]) == (
        trace_id,
        "whatsapp",
        "sent",
    )
    assert "inbound.message" in _ancestors(send, by_id)


async def test_a_send_without_the_job_span_still_joins_the_message_trace(spans) -> None:  # type: ignore[no-untyped-def]
    """Code holding only a message's ``trace_id`` (a delivery sweep) parents under its root span."""
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    with tracing.within_message_trace(trace_id), tracing.span("outbox.send"):
        pass
    (send,) = spans.get_finished_spans()
    assert (send.context.trace_id, send.parent.span_id if send.parent else None) == (
        int(trace_id, 16),
        tracing.root_span_id(trace_id),
    )
