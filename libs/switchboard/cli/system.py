"""``switchboard run`` (the whole system on one machine) and ``switchboard status``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

import typer

from switchboard import __version__
from switchboard.cli.root import app
from switchboard.cli.runner import command_settings, friendly_errors

__all__ = ["run", "status", "version"]


@app.command()
def version() -> None:
    """Print the version (the same as `switchboard --version`)."""
    typer.echo(f"switchboard {__version__}")


@app.command()
@friendly_errors
def run() -> None:
    """Start everything: embedded Postgres/Redis (when DATABASE_URL/REDIS_URL are unset), migrations,
    the demo tenant (on an empty database), then every service as a child process with prefixed logs.

    Ctrl-C (or SIGTERM) stops all of it.
    """
    from switchboard.db.engine import create_engine, session_factory, session_scope
    from switchboard.db.migrate import upgrade
    from switchboard.observability import configure_logging, get_logger
    from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
    from switchboard.runtime.services import SERVICES
    from switchboard.runtime.supervisor import RunLock, Supervisor, check_ports_free
    from switchboard.seed import seed_demo_admin, seed_demo_if_empty
    from switchboard.settings import GENERATED_SECRETS

    started = time.monotonic()
    settings = command_settings(attach_to_run=False)
    configure_logging(
        service="run", level=settings.log_level, fmt=settings.log_format, unmask_pii=settings.log_unmask_pii
    )
    log = get_logger("switchboard.run")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(settings.data_dir)
    lock.acquire()
    check_ports_free(settings, SERVICES)
    if settings.model_server_control:  # a test hook: never next to a real provider or off loopback
        from switchboard.errors import SettingsError
        from switchboard.llm.config import has_provider_key
        from switchboard.standins.offline_server import control_refusal

        refusal = control_refusal(host=settings.host, has_provider_key=has_provider_key(settings))
        if refusal is not None:
            raise SettingsError("MODEL_SERVER_CONTROL", refusal)
    # Create every generated secret now, so the files exist before anyone needs them
    # (e.g. signing a test webhook with DATA_DIR/secrets/meta_app.secret right after start-up).
    for name in GENERATED_SECRETS:
        settings.secret(name)

    stop_requested = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True
        # The children see SIGTERM whichever signal came here (stop_all sends it): their "shutdown on
        # SIGTERM" lines after a Ctrl-C are this forwarding, said once here.
        log.info("stop requested; sending SIGTERM to every service", signal=signal.Signals(signum).name)
        supervisor.request_stop()

    pg = EmbeddedPostgres(settings.data_dir / "postgres") if not settings.database_url else None
    rd = (
        EmbeddedRedis(settings.data_dir / "redis", settings.embedded_redis_port, settings.host)
        if not settings.redis_url
        else None
    )
    env = dict(os.environ)
    child_format = settings.log_format
    if child_format == "auto":
        child_format = "console" if sys.stdout.isatty() else "json"
    supervisor = Supervisor(
        settings=settings, services=SERVICES, env=env, fork_server=settings.run_fork_server
    )
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    exit_code = 0
    try:
        supervisor.prepare()  # the fork server's preload (~2 s of CPU) overlaps Postgres and migrations
        database_url = pg.start() if pg else settings.database_url
        redis_url = rd.start() if rd else settings.redis_url
        assert database_url and redis_url
        log.info("migrating database")
        upgrade(database_url)

        demo_login: tuple[str, str] | None = None

        async def seed() -> None:
            nonlocal demo_login
            engine = create_engine(database_url, pool_size=1)
            try:
                async with session_scope(session_factory(engine)) as session:
                    tenant = await seed_demo_if_empty(session)
                    if tenant is not None:
                        demo_login = await seed_demo_admin(session, tenant)
                        log.info("seeded demo tenant", tenant_id=str(tenant.id), slug=tenant.slug)
            finally:
                await engine.dispose()

        asyncio.run(seed())
        env.update(
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            DATA_DIR=str(settings.data_dir.resolve()),
            LOG_FORMAT=child_format,
            PYTHONUNBUFFERED="1",
        )
        if not stop_requested:
            supervisor.start_all()
            results = supervisor.wait_healthy(redis_url)
            supervisor.write_state(
                settings.run_state_path,
                database_url=database_url if pg else None,
                redis_url=redis_url if rd else None,
            )
            if not stop_requested:
                _print_ready(settings, results, time.monotonic() - started, demo_login)
                exit_code = supervisor.monitor()
    finally:
        supervisor.stop_all()
        if rd:
            rd.stop()
        if pg:
            pg.stop()
        settings.run_state_path.unlink(missing_ok=True)
        lock.release()
        log.info("switchboard stopped")
    raise typer.Exit(exit_code)


def _service_line(name: str, where: str, state: str, width: int, where_at: int = 28) -> str:
    return f"{name:<{width}} {where:<{where_at}} {state}"


def _print_ready(
    settings: Any, results: dict[str, tuple[bool, str]], seconds: float, demo_login: tuple[str, str] | None
) -> None:
    from switchboard.runtime.services import SERVICES, name_width, where_width

    lines = [f"switchboard {__version__} up in {seconds:.1f} s (DATA_DIR={settings.data_dir})"]
    for spec in SERVICES:
        ok, detail = results.get(spec.name, (False, "not started"))
        state = "healthy" if ok else "NOT HEALTHY: " + detail
        lines.append(
            "  " + _service_line(spec.name, spec.where(settings), state, name_width(), where_width(settings))
        )
    console_url = settings.service_url(settings.console_port)
    if demo_login is not None:  # only on the run that seeded the demo: the password is stored nowhere else
        lines.append(
            f"Console: {console_url}/login  e-mail {demo_login[0]}  password {demo_login[1]}  "
            "(shown once; `switchboard users passwd` sets a new one)"
        )
    else:
        lines.append(f"Console: {console_url}/login")
    lines.append("Press Ctrl-C to stop. `switchboard status` checks the services from another terminal.")
    typer.echo("\n".join(lines))


@app.command()
@friendly_errors
def status() -> None:
    """Print each service's name, URL and health, one line each. Exit 0 only when all are healthy.

    Checks the `switchboard run` of this folder's DATA_DIR (its run.json); with no live run there and no
    REDIS_URL set (services run elsewhere, e.g. containers), says "not running" and exits 1 instead of
    asking whatever answers on the default ports. A port that answers as another program (or another
    Switchboard service) is reported DOWN.
    """
    from switchboard.runtime.resources import live_run_state
    from switchboard.runtime.services import SERVICES, name_width, where_width
    from switchboard.runtime.supervisor import check_service_health

    settings = command_settings()
    state = live_run_state(settings)
    if state is None and not settings.redis_url:
        where = settings.data_dir.resolve()
        detail = "no data there yet" if not settings.data_dir.exists() else "no live `switchboard run` there"
        typer.echo(f"not running: start it with make run (DATA_DIR={where}: {detail})")
        raise typer.Exit(1)
    redis_url = settings.redis_url or (state or {}).get("embedded_redis_url")
    import httpx

    all_ok = True
    with httpx.Client() as http:  # one client for all: each new one builds an SSL context (~50 ms CPU)
        for spec in SERVICES:
            ok, detail = check_service_health(spec, settings, redis_url, http=http)
            all_ok &= ok
            line = _service_line(
                spec.name,
                spec.where(settings),
                f"{'healthy' if ok else 'DOWN'}  {detail}",
                name_width(),
                where_width(settings),
            )
            typer.echo(line)
    raise typer.Exit(0 if all_ok else 1)
