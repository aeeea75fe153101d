"""OpenTelemetry tracing of one message's path (docs/operations.md#logs-and-traces).

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (or a test installs an exporter): then no SDK is
loaded, nothing is instrumented, and :func:`span` is one ``None`` check, so the webhook path pays
nothing. When on, :func:`configure_tracing` installs the SDK once per process with an OTLP/HTTP
exporter (``OTEL_EXPORTER_OTLP_*`` variables are read by the exporter itself; ``/v1/traces`` is
appended to the endpoint), and instruments FastAPI apps (:func:`instrument_app`), httpx, Redis and
each SQLAlchemy engine (:func:`instrument_engine`).

The traces of one message (W3C Trace Context, ``traceparent``):

* **webhook trace**: ``POST /webhooks/<channel>`` (server span) → ``inbound.ingest`` →
  ``inbound.store``; every job the ingest enqueues carries the ``traceparent`` of that moment in its
  ARQ kwargs (:func:`job_trace_kwargs`), and its ``job <name>`` span is a child there. One webhook
  delivery may carry several messages, so it cannot be any one message's trace.
* **message trace**: ``inbound.message``, opened by the job once the conversation is known, is the
  root of a trace whose id is the message's own ``trace_id`` (``trace_id_for(conversation, inbound
  message)``, 32 hex digits = the 128-bit OTel trace id, :func:`otel_trace_id`), with a *link* to the
  job span. The turn (``POST /v1/turns`` → ``agent.turn``), every model call (``llm.call``), tool
  call (``tool.call``, MCP included: ``traceparent`` goes over HTTP to the tool server) and send
  (``outbox.send``) are in it. Its root span id is derived from the trace id too
  (:func:`root_span_id`), so code that holds only ``trace_id`` (a delivery sweep, a turn asked for
  without a ``traceparent``) still parents its spans inside the message's trace
  (:func:`within_message_trace`): a message id is enough to find the whole trace.

A client span of the instrumentations with no parent (arq polling Redis, a pool's ping) starts no
trace (:class:`_RootFilter`).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from switchboard.observability.pii import mask_attributes

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "TRACEPARENT_KWARG",
    "SpanKind",
    "StatusCode",
    "configure_tracing",
    "context_from_traceparent",
    "current_traceparent",
    "inject_traceparent",
    "instrument_app",
    "instrument_engine",
    "is_enabled",
    "job_trace_kwargs",
    "message_span",
    "otel_trace_id",
    "root_span_id",
    "set_error",
    "span",
    "within_message_trace",
]

TRACEPARENT_KWARG = "traceparent"
"""ARQ job kwarg carrying the enqueuer's W3C ``traceparent`` (popped by the worker's job wrapper)."""
EXCLUDED_URLS = "healthz,metrics"
"""Routes never traced (probes and scrapes: many a minute, nothing to learn)."""

_PROPAGATOR = TraceContextTextMapPropagator()
_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None
_engines: weakref.WeakSet[Any] = weakref.WeakSet()
_forced_ids: ContextVar[tuple[int, int] | None] = ContextVar("switchboard_forced_ids", default=None)


def is_enabled() -> bool:
    """Whether this process records spans."""
    return _tracer is not None


def configure_tracing(*, service: str, exporter: SpanExporter | None = None) -> bool:
    """Install the OpenTelemetry SDK for this process, once; later calls change nothing.

    Args:
        service: ``service.name`` resource attribute is ``switchboard-<service>``.
        exporter: where spans go (tests pass an ``InMemorySpanExporter``; exported synchronously).
            ``None``: OTLP over HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else tracing stays off.

    Returns:
        Whether tracing is on.
    """
    global _provider, _tracer
    with _lock:
        if _provider is not None:
            return True
        if exporter is None and not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            return False
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        from opentelemetry.instrumentation.redis import RedisInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

        class _MessageIds(RandomIdGenerator):
            """Random ids, except the ids :func:`message_span` forces for a message trace's root."""

            def generate_trace_id(self) -> int:
                forced = _forced_ids.get()
                return forced[0] if forced else super().generate_trace_id()

            def generate_span_id(self) -> int:
                forced = _forced_ids.get()
                return forced[1] if forced else super().generate_span_id()

        provider = TracerProvider(
            resource=Resource.create({"service.name": f"switchboard-{service}"}),
            sampler=ParentBased(root=_RootFilter(ALWAYS_ON)),
            id_generator=_MessageIds(),
        )
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        HTTPXClientInstrumentor().instrument(tracer_provider=provider)
        RedisInstrumentor().instrument(tracer_provider=provider)
        _provider = provider
        _tracer = provider.get_tracer("switchboard")
        return True


ROOT_CLIENT_SPANS = frozenset({"llm.call", "outbox.send"})
"""Our own client spans, which may start a trace (a memory summary's model call, a sweep's send)."""


class _RootFilter:
    """Sampler for spans without a parent: the instrumentations' client spans (arq polling Redis, a
    pool's ``SELECT 1``) start no trace; :data:`ROOT_CLIENT_SPANS` and every other kind do."""

    def __init__(self, delegate: Any) -> None:
        self._delegate = delegate

    def should_sample(  # noqa: PLR0913 (the Sampler interface)
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> Any:
        from opentelemetry.sdk.trace.sampling import Decision, SamplingResult

        if kind == SpanKind.CLIENT and name not in ROOT_CLIENT_SPANS:
            return SamplingResult(Decision.DROP)
        return self._delegate.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return "SwitchboardRootFilter"


def instrument_app(app: FastAPI) -> None:
    """Server spans (and ``traceparent`` extraction) for every route of ``app`` but probes and scrapes."""
    if _provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=_provider, excluded_urls=EXCLUDED_URLS, exclude_spans=["receive", "send"]
    )


def instrument_engine(engine: AsyncEngine) -> None:
    """One client span per SQL statement of ``engine`` (the SQLAlchemy instrumentation's engine hooks)."""
    if _provider is None or engine.sync_engine in _engines:
        return
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.metrics import NoOpMeterProvider

    usage = NoOpMeterProvider().get_meter("switchboard").create_up_down_counter("db.client.connections.usage")
    EngineTracer(_provider.get_tracer("opentelemetry.instrumentation.sqlalchemy"), engine.sync_engine, usage)
    _engines.add(engine.sync_engine)


class _NoSpan:
    """What :func:`span` returns when tracing is off: enters as the non-recording span, does nothing."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(self, *_exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


def span(
    name: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    context: otel_context.Context | None = None,
    links: Sequence[Link] | None = None,
    record_errors: bool = True,
) -> AbstractContextManager[Span]:
    """A span around the block (``with span(...) as current:``), current inside it.

    Args:
        record_errors: an exception leaving the block is recorded and sets the error status; ``False``
            where exceptions are flow control (ARQ's ``Retry``) and the caller marks failures itself.

    Off: a shared do-nothing context manager (one check; the webhook path calls this per request).
    """
    if _tracer is None:
        return _NO_SPAN
    return _tracer.start_as_current_span(
        name,
        context=context,
        kind=kind,
        attributes=mask_attributes(attributes),
        links=links,
        record_exception=record_errors,
        set_status_on_exception=record_errors,
    )


def set_error(current: Span, description: str) -> None:
    """Mark ``current`` failed with a short reason (no customer text)."""
    if current.is_recording():
        current.set_status(Status(StatusCode.ERROR, description[:200]))


def otel_trace_id(trace_id: str) -> int:
    """The 128-bit OTel trace id of a message's ``trace_id``: its 32 hex digits as they are; any other
    string (``memory-<id>``, ``admin-...``) through SHA-256."""
    if len(trace_id) == 32:
        try:
            value = int(trace_id, 16)
        except ValueError:
            value = 0
        if value:
            return value
    return int(hashlib.sha256(trace_id.encode()).hexdigest()[:32], 16) or 1


def root_span_id(trace_id: str) -> int:
    """The 64-bit span id of the ``inbound.message`` root of ``trace_id``'s trace (first attempt)."""
    return int(hashlib.sha256(f"root:{trace_id}".encode()).hexdigest()[:16], 16) or 1


def _message_parent(trace_id: str) -> otel_context.Context:
    parent = SpanContext(
        otel_trace_id(trace_id),
        root_span_id(trace_id),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent), otel_context.Context())


@contextmanager
def message_span(
    name: str, trace_id: str, *, first_attempt: bool, attributes: Mapping[str, Any] | None = None
) -> Iterator[Span]:
    """The root span of a message's trace (see the module docstring), linked to the current span.

    Args:
        trace_id: the message's ``trace_id`` (``trace_id_for``).
        first_attempt: the first processing of the message: the span takes the trace's root span id.
            A later attempt is a child of that root instead (two spans never share an id).
    """
    if _tracer is None:
        yield INVALID_SPAN
        return
    current = trace.get_current_span().get_span_context()
    links = [Link(current)] if current.is_valid else None
    if first_attempt:
        token = _forced_ids.set((otel_trace_id(trace_id), root_span_id(trace_id)))
        try:
            started = _tracer.start_span(
                name,
                context=otel_context.Context(),
                kind=SpanKind.CONSUMER,
                attributes=mask_attributes(attributes),
                links=links,
            )
        finally:
            _forced_ids.reset(token)
    else:
        started = _tracer.start_span(
            name,
            context=_message_parent(trace_id),
            kind=SpanKind.CONSUMER,
            attributes=mask_attributes(attributes),
            links=links,
        )
    # a Retry (conversation busy, orchestrator down) leaves through here: not an error of the span
    with trace.use_span(started, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        yield started


@contextmanager
def within_message_trace(trace_id: str | None) -> Iterator[None]:
    """Make the message trace of ``trace_id`` current for the block, unless the current span is already
    in it (then nothing changes). Off, or no ``trace_id``: nothing changes."""
    if _tracer is None or not trace_id:
        yield
        return
    if trace.get_current_span().get_span_context().trace_id == otel_trace_id(trace_id):
        yield
        return
    token = otel_context.attach(_message_parent(trace_id))
    try:
        yield
    finally:
        otel_context.detach(token)


def current_traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` value, or ``None`` (off, or no span)."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def job_trace_kwargs() -> dict[str, str]:
    """Extra ``enqueue_job`` kwargs that carry the current span to the job (``{}`` when off)."""
    value = current_traceparent()
    return {TRACEPARENT_KWARG: value} if value else {}


def context_from_traceparent(value: str | None) -> otel_context.Context | None:
    """The remote parent a ``traceparent`` names, or ``None`` (absent or malformed)."""
    if not value:
        return None
    extracted = _PROPAGATOR.extract({"traceparent": value})
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def inject_traceparent(headers: Any) -> None:
    """Add the current ``traceparent`` to a mutable header mapping (an httpx2 request hook uses it: the
    MCP SDK's HTTP client is not auto-instrumented)."""
    value = current_traceparent()
    if value:
        headers["traceparent"] = value
