"""The suite's one in-memory span exporter: the OpenTelemetry SDK is installed once per process, so
every test that reads spans shares it (``spans`` fixture: tracing on, the exporter emptied)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from switchboard.observability import tracing

__all__ = ["spans"]

EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    """Tracing on for this process from now on (apps built later are instrumented), no spans yet."""
    assert tracing.configure_tracing(service="test", exporter=EXPORTER)
    EXPORTER.clear()
    return EXPORTER
