"""Tracing helpers: which spans may start a trace, and the ids a message's trace is given."""

from __future__ import annotations

from opentelemetry.trace import SpanKind
from switchboard.contracts import trace_id_for
from switchboard.observability import tracing


def test_a_client_span_without_a_parent_starts_no_trace_unless_it_is_ours(spans) -> None:
    with tracing.span("ZRANGEBYSCORE", kind=SpanKind.CLIENT):  # what arq's queue poll looks like
        pass
    with tracing.span("llm.call", kind=SpanKind.CLIENT):  # a memory summary's model call
        pass
    assert [s.name for s in spans.get_finished_spans()] == ["llm.call"]


def test_a_message_trace_id_is_the_messages_trace_id_and_survives_a_job_hop(spans) -> None:
    trace_id = trace_id_for("conversation", "message")
    assert tracing.otel_trace_id(trace_id) == int(trace_id, 16)
    assert tracing.otel_trace_id("memory-123") == tracing.otel_trace_id("memory-123") != 0
    with tracing.span("job process_inbound", kind=SpanKind.CONSUMER):
        with tracing.message_span("inbound.message", trace_id, first_attempt=True):
            carried = tracing.job_trace_kwargs()
    with tracing.span("job deliver_outbox", context=tracing.context_from_traceparent(carried["traceparent"])):
        pass
    job, message, later = sorted(spans.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert (message.context.trace_id, message.context.span_id, message.parent) == (
        int(trace_id, 16),
        tracing.root_span_id(trace_id),
        None,
    )
    assert [link.context.span_id for link in message.links] == [job.context.span_id]
    assert (later.context.trace_id, later.parent.span_id if later.parent else None) == (
        int(trace_id, 16),
        message.context.span_id,
    )
    assert tracing.context_from_traceparent("garbage") is None
