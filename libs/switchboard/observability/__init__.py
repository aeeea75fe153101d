"""Observability: structured logs (:mod:`.logs`), OpenTelemetry traces (:mod:`.tracing`) and
Prometheus metrics (:mod:`.metrics`).

The log helpers are re-exported here (every module imports them from ``switchboard.observability``);
tracing and metrics are imported from their modules.
"""

from switchboard.observability.logs import (
    adopt_library_loggers,
    bind_message_context,
    configure_logging,
    get_logger,
    message_context,
)

__all__ = [
    "configure_logging",
    "get_logger",
    "bind_message_context",
    "message_context",
    "adopt_library_loggers",
]
