"""What every command shares: its settings, the database it works on, and one error wrapper.

* :func:`command_settings`: the environment and ``.env``; while ``switchboard run`` is up, the host
  and ports it recorded in ``DATA_DIR/run.json`` win, so a command typed in another terminal (without
  the same environment) finds the running services. Every command that talks to the running system
  (``status``, ``simulate``, ``simulate whatsapp``, ``channel add-whatsapp``) gets its settings here.
* :func:`run_db` / :func:`run_in_session`: run async work against ``DATABASE_URL`` or the embedded
  server in ``DATA_DIR`` (attached to while ``run`` is up, started for the command otherwise).
* :func:`friendly_errors`: Switchboard errors, bad values, missing files and database trouble become
  one line on stderr (``error: ...``) and exit status 2 instead of a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from switchboard.errors import SwitchboardError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import async_sessionmaker
    from sqlmodel.ext.asyncio.session import AsyncSession

    from switchboard.settings import Settings

__all__ = [
    "TenantOpt",
    "command_settings",
    "describe_error",
    "human_duration",
    "fail",
    "friendly_errors",
    "run_db",
    "run_in_session",
    "shorten",
]

T = TypeVar("T")

EXIT_ERROR = 2
"""Exit status of a command that failed with a one-line error."""

TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="Tenant slug (or id).")]


def describe_error(exc: BaseException) -> str | None:
    """The one-line message for an error a user can act on, or ``None`` for a bug (keep the traceback)."""
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError):
        detail = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
        hint = " (run `switchboard db upgrade`)" if "does not exist" in detail else ""
        return f"database: {detail}{hint}"
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}"
    if isinstance(exc, SwitchboardError | OSError | ValueError | json.JSONDecodeError):
        return str(exc) or type(exc).__name__
    return None


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` in red on stderr; ``raise fail(...)`` exits with status 2."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(EXIT_ERROR)


def friendly_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorate a command: an error :func:`describe_error` knows becomes one line and exit status 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            message = describe_error(exc)
            if message is None:
                raise
            raise fail(message) from None

    return wrapper


def command_settings(*, attach_to_run: bool = True) -> Settings:
    """Settings for a command; while ``switchboard run`` is up (``DATA_DIR/run.json`` names a live
    pid), its host and ports win.

    Raises:
        SettingsError: a malformed setting.
    """
    from switchboard.runtime.resources import live_run_state
    from switchboard.settings import load_settings

    settings = load_settings()
    state = live_run_state(settings) if attach_to_run else None
    if state and state.get("network"):
        settings = load_settings(**state["network"])
    return settings


def run_db(
    work: Callable[[async_sessionmaker[AsyncSession], Settings], Awaitable[T]],
    *,
    settings: Settings | None = None,
    pool_size: int = 2,
    log_at_log_level: bool = False,
) -> T:
    """``asyncio.run(work(sessions, settings))`` on the command's database (see the module docstring).

    Args:
        settings: default :func:`command_settings`.
        pool_size: connections the command may hold at once.
        log_at_log_level: log to stderr at ``LOG_LEVEL`` (``kb`` commands show their progress logs),
            readable unless ``LOG_FORMAT=json``; otherwise only warnings and errors show. The
            embedded server's start and stop lines show only at ``DEBUG``, as for every other
            command (they read as if a second PostgreSQL started while ``run`` is up).

    Raises:
        SettingsError: no database in ``DATA_DIR`` (and ``DATABASE_URL`` unset).
    """
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.runtime.resources import database_url_for

    settings = settings or command_settings()
    if log_at_log_level:
        from switchboard.observability import configure_logging

        configure_logging(
            service="cli",
            level=settings.log_level,
            fmt=settings.log_format,
            interactive=True,
            unmask_pii=settings.log_unmask_pii,
        )
        logging.getLogger("switchboard.runtime.embedded").setLevel(
            logging.NOTSET if settings.log_level == "DEBUG" else logging.WARNING
        )
    with database_url_for(settings) as url:

        async def go() -> T:
            engine = create_engine(url, pool_size=pool_size)
            try:
                return await work(session_factory(engine), settings)
            finally:
                await engine.dispose()

        return asyncio.run(go())


def run_in_session(work: Callable[[AsyncSession], Awaitable[T]], *, settings: Settings | None = None) -> T:
    """:func:`run_db` with ``work(session)`` in one transaction (committed when it returns)."""
    from switchboard.db.engine import session_scope

    async def scoped(sessions: async_sessionmaker[AsyncSession], _settings: Settings) -> T:
        async with session_scope(sessions) as session:
            return await work(session)

    return run_db(scoped, settings=settings, pool_size=1)


def human_duration(ms: float | None) -> str:
    """A duration in milliseconds as people read it: ``"340 ms"``, ``"1.2 s"``, ``"3 min 4 s"``,
    ``"2 h 5 min"``; ``"-"`` for ``None`` (not measured). Negative values read as ``0 ms``."""
    if ms is None:
        return "-"
    ms = max(0.0, float(ms))
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    total = round(seconds)
    if total < 3600:
        minutes, rest = divmod(total, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(total, 3600)
    minutes = rest // 60
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def shorten(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters, ending in "…" when cut (a table cell of
    ``conversations list``, ``kb list``)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"
