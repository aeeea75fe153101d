"""The ``switchboard`` command line.

``switchboard run`` starts the whole system on one machine; ``switchboard status`` checks it;
``db`` and ``tenant`` manage the database. Every command reads the same settings (environment and
``.env``) and ``DATA_DIR``, so it finds what ``run`` started.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any

import typer

from switchboard import __version__
from switchboard.errors import SwitchboardError
from switchboard.knowledge.cli import kb_app

app = typer.Typer(
    name="switchboard",
    help="Switchboard: self-hostable, multi-tenant AI customer support (WhatsApp, Gmail, Instagram).",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
tenant_app = typer.Typer(help="Tenants: the businesses Switchboard answers for.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(tenant_app, name="tenant")
data_app = typer.Typer(
    help="Business data the tools read (catalog, orders, stores, meeting slots).", no_args_is_help=True
)
tools_app = typer.Typer(
    help="Per-tenant MCP toolboxes: which tools a tenant's agent may call.", no_args_is_help=True
)
app.add_typer(data_app, name="data")
app.add_typer(tools_app, name="tools")
app.add_typer(kb_app, name="kb")
agents_app = typer.Typer(
    help="Human agents: staff who take over conversations from their own WhatsApp.", no_args_is_help=True
)
app.add_typer(agents_app, name="agents")

from switchboard.channels.whatsapp.cli import channel_app, simulate_app  # noqa: E402  (WhatsApp, issue 4)

app.add_typer(channel_app, name="channel")
app.add_typer(simulate_app, name="simulate")


def _friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn Switchboard errors into one red line on stderr and exit status 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SwitchboardError, ValueError) as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None

    return wrapper


def _settings(*, attach_to_run: bool = True):  # type: ignore[no-untyped-def]
    """Settings for a command; while ``switchboard run`` is up, its host and ports win.

    ``run`` records the ports it started services on in ``DATA_DIR/run.json``; a command typed in
    another terminal (without the same environment) still finds those services.
    """
    from switchboard.runtime.resources import read_run_state
    from switchboard.settings import load_settings

    settings = load_settings()
    state = read_run_state(settings) if attach_to_run else None
    if state and state.get("network") and _pid_alive(state.get("pid")):
        settings = load_settings(**state["network"])
    return settings


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main() -> None:
    """Console-script entry point: Switchboard errors, bad files and bad values become one line on
    stderr and exit status 2 instead of a traceback."""
    import json

    from sqlalchemy.exc import DBAPIError

    try:
        app()
    except DBAPIError as exc:
        detail = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
        hint = " (run `switchboard db upgrade`)" if "does not exist" in detail else ""
        typer.secho(f"error: database: {detail}{hint}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except (SwitchboardError, OSError, ValueError, json.JSONDecodeError) as exc:
        message = str(exc) or type(exc).__name__
        if isinstance(exc, FileNotFoundError) and exc.filename:
            message = f"no such file: {exc.filename}"
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
        sys.exit(2)


@app.callback(invoke_without_command=True)
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(f"switchboard {__version__}")
        raise typer.Exit(0)
    # Every command logs to stderr (stdout stays clean for JSON lines and tables); `run`
    # reconfigures at LOG_LEVEL, the others only show warnings and errors.
    from switchboard.observability import configure_logging

    configure_logging(service="cli", level="WARNING", fmt="console")


@app.command()
@_friendly_errors
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
    from switchboard.seed import seed_demo_if_empty
    from switchboard.settings import GENERATED_SECRETS

    started = time.monotonic()
    settings = _settings(attach_to_run=False)
    configure_logging(service="run", level=settings.log_level, fmt=settings.log_format)
    log = get_logger("switchboard.run")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(settings.data_dir)
    lock.acquire()
    check_ports_free(settings, SERVICES)
    # Create every generated secret now, so the files exist before anyone needs them
    # (e.g. signing a test webhook with DATA_DIR/secrets/meta_app.secret right after start-up).
    for name in GENERATED_SECRETS:
        settings.secret(name)

    stop_requested = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True
        log.info("stop requested", signal=signal.Signals(signum).name)
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
    supervisor = Supervisor(settings=settings, services=SERVICES, env=env)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    exit_code = 0
    try:
        database_url = pg.start() if pg else settings.database_url
        redis_url = rd.start() if rd else settings.redis_url
        assert database_url and redis_url
        log.info("migrating database")
        upgrade(database_url)

        async def seed() -> None:
            engine = create_engine(database_url, pool_size=1)
            try:
                async with session_scope(session_factory(engine)) as session:
                    tenant = await seed_demo_if_empty(session)
                    if tenant is not None:
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
                _print_ready(settings, results, time.monotonic() - started)
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


def _print_ready(settings: Any, results: dict[str, tuple[bool, str]], seconds: float) -> None:
    from switchboard.runtime.services import SERVICES

    lines = [f"switchboard {__version__} up in {seconds:.1f} s (DATA_DIR={settings.data_dir})"]
    for spec in SERVICES:
        ok, detail = results.get(spec.name, (False, "not started"))
        where = spec.url(settings) or "(queue worker)"
        lines.append(f"  {spec.name:<13} {where:<28} {'healthy' if ok else 'NOT HEALTHY: ' + detail}")
    lines.append("Press Ctrl-C to stop. `switchboard status` checks the services from another terminal.")
    typer.echo("\n".join(lines))


@app.command()
@_friendly_errors
def status() -> None:
    """Print each service's name, URL and health, one line each. Exit 0 only when all are healthy."""
    from switchboard.runtime.resources import read_run_state
    from switchboard.runtime.services import SERVICES
    from switchboard.runtime.supervisor import check_service_health

    settings = _settings()
    state = read_run_state(settings) or {}
    redis_url = settings.redis_url or state.get("embedded_redis_url")
    all_ok = True
    for spec in SERVICES:
        ok, detail = check_service_health(spec, settings, redis_url)
        all_ok &= ok
        where = spec.url(settings) or "(queue worker)"
        typer.echo(f"{spec.name:<13} {where:<28} {'healthy' if ok else 'DOWN'}  {detail}")
    raise typer.Exit(0 if all_ok else 1)


@db_app.command("upgrade")
@_friendly_errors
def db_upgrade(revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Apply migrations up to REVISION (default: newest)."""
    from switchboard.db.migrate import upgrade
    from switchboard.runtime.resources import database_url_for

    with database_url_for(_settings(), create=True) as url:
        upgrade(url, revision)
    typer.echo(f"database at {revision}")


@db_app.command("downgrade")
@_friendly_errors
def db_downgrade(
    revision: Annotated[str, typer.Option(help="Target revision; 'base' drops everything.")],
) -> None:
    """Revert migrations down to REVISION."""
    from switchboard.db.migrate import downgrade
    from switchboard.runtime.resources import database_url_for

    with database_url_for(_settings()) as url:
        downgrade(url, revision)
    typer.echo(f"database at {revision}")


@db_app.command("revision")
@_friendly_errors
def db_revision(
    message: Annotated[str, typer.Option("-m", "--message", help="What the migration does.")],
) -> None:
    """(Developers) write a new migration autogenerated from the models."""
    from switchboard.db.migrate import revision
    from switchboard.runtime.resources import database_url_for

    with database_url_for(_settings()) as url:
        revision(url, message)


def _with_session(work: Callable[[Any], Any]) -> Any:
    from switchboard.db.engine import create_engine, session_factory, session_scope
    from switchboard.runtime.resources import database_url_for

    with database_url_for(_settings()) as url:

        async def go() -> Any:
            engine = create_engine(url, pool_size=1)
            try:
                async with session_scope(session_factory(engine)) as session:
                    return await work(session)
            finally:
                await engine.dispose()

        return asyncio.run(go())


@tenant_app.command("create")
@_friendly_errors
def tenant_create(
    slug: Annotated[str, typer.Option(help="Unique short name: a-z, 0-9 and '-'.")],
    name: Annotated[str, typer.Option(help="Display name of the business.")],
    organization: Annotated[str | None, typer.Option(help="Organization name (default: NAME).")] = None,
) -> None:
    """Create a tenant and print its id."""
    from switchboard.tenants import create_tenant

    async def work(session: Any) -> Any:
        return await create_tenant(session, slug=slug, name=name, organization_name=organization)

    tenant = _with_session(work)
    typer.echo(f"created tenant {tenant.slug} id={tenant.id}")


@tenant_app.command("list")
@_friendly_errors
def tenant_list() -> None:
    """List tenants: slug, id, name."""
    from switchboard.tenants import list_tenants

    for tenant in _with_session(list_tenants):
        typer.echo(f"{tenant.slug:<20} {tenant.id}  {tenant.name}")


TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant slug (or id).")]


@data_app.command("import")
@_friendly_errors
def data_import(
    tenant: TenantOpt,
    kind: Annotated[str, typer.Option(help="products | orders | stores | slots")],
    file: Annotated[str, typer.Argument(help="CSV file with a header row (see README, 'Tools (MCP)').")],
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the valid rows even when some are rejected.")
    ] = False,
) -> None:
    """Import a CSV for a tenant: every row validated, rejected rows reported with line and reason.

    One transaction: by default a file with any rejected row imports nothing (exit status 1).
    Rows are upserts (by SKU, order number, store name+city, slot start+resource).
    """
    from pathlib import Path

    from switchboard.tenants import get_tenant
    from switchboard.tools.importers import import_csv

    data = Path(file).read_bytes()

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await import_csv(
            session,
            tenant_id=tenant_row.id,
            kind=kind,
            data=data,
            skip_invalid=skip_invalid,
            actor="admin:cli",
        )

    report = _with_session(work)
    if report.committed:
        typer.echo(
            f"imported {report.imported} of {report.rows} {kind} rows ({len(report.rejected)} rejected)"
        )
        for rejected in report.rejected:  # the reasons, so the skipped rows can be fixed and re-imported
            typer.echo(f"  skipped line {rejected.line}: " + "; ".join(rejected.reasons))
    else:
        for rejected in report.rejected:
            typer.echo(f"line {rejected.line}: " + "; ".join(rejected.reasons), err=True)
        typer.secho(
            f"nothing imported: {len(report.rejected)} of {report.rows} rows rejected "
            "(fix them, or use --skip-invalid)",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(1)


def _tool_change(tenant: str, change: Callable[[Any, Any], Any]) -> Any:
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        return await change(session, (await get_tenant(session, tenant)).id)

    return _with_session(work)


@tools_app.command("list")
@_friendly_errors
def tools_list(tenant: TenantOpt) -> None:
    """List the tools of a tenant: name, enabled, read/write, configuration."""
    import json

    from switchboard.tools.toolbox import list_assignments

    for item in _tool_change(tenant, list_assignments):
        state = "enabled " if item.enabled else "disabled"
        typer.echo(f"{item.tool_name:<24} {state} {item.kind or '?':<5} {json.dumps(item.custom_config)}")


@tools_app.command("enable")
@_friendly_errors
def tools_enable(tenant: TenantOpt, tool: Annotated[str, typer.Argument(help="Tool name.")]) -> None:
    """Let a tenant's agent see and call TOOL."""
    from switchboard.tools.toolbox import set_enabled

    _tool_change(tenant, lambda s, t: set_enabled(s, t, tool, enabled=True, actor="admin:cli"))
    typer.echo(f"{tool} enabled for {tenant}")


@tools_app.command("disable")
@_friendly_errors
def tools_disable(tenant: TenantOpt, tool: Annotated[str, typer.Argument(help="Tool name.")]) -> None:
    """Hide TOOL from a tenant's agent; a call to it then fails closed (Forbidden + security alert)."""
    from switchboard.tools.toolbox import set_enabled

    _tool_change(tenant, lambda s, t: set_enabled(s, t, tool, enabled=False, actor="admin:cli"))
    typer.echo(f"{tool} disabled for {tenant}")


@tools_app.command("configure")
@_friendly_errors
def tools_configure(
    tenant: TenantOpt,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    config: Annotated[str, typer.Option("--config", help="JSON object, e.g. '{\"needs_approval\": true}'.")],
) -> None:
    """Replace the custom_config a tenant's TOOL receives as tool_config."""
    import json

    from switchboard.tools.toolbox import configure_tool

    try:
        parsed = json.loads(config)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config is not valid JSON: {exc.msg}") from None
    _tool_change(tenant, lambda s, t: configure_tool(s, t, tool, parsed, actor="admin:cli"))
    typer.echo(f"{tool} configured for {tenant}: {json.dumps(parsed)}")


@simulate_app.command("turn")  # `switchboard simulate "msg"` also lands here (see SimulateGroup)
@_friendly_errors
def simulate(
    message: Annotated[str, typer.Argument(help="What the customer writes.")],
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")] = "demo",
    customer: Annotated[
        str, typer.Option(help="Simulated customer's name (one history per name).")
    ] = "demo-customer",
    new: Annotated[bool, typer.Option("--new", help="Start a new conversation.")] = False,
    in_process: Annotated[
        bool, typer.Option("--in-process", help="Run the turn here even if the orchestrator is running.")
    ] = False,
) -> None:
    """Send MESSAGE as a demo customer and print the agent's reply, the model and the tool calls.

    Uses the running orchestrator (`make run`) when it answers, otherwise runs the turn in this
    process (with the offline model when no provider key is configured). Example:
    switchboard simulate --tenant demo "Can I talk to a person?"
    """
    from switchboard.agent.simulate import simulate_turn
    from switchboard.runtime.resources import database_url_for

    if not message.strip():
        raise ValueError("the message is empty: give the text the customer writes")
    settings = _settings()
    with database_url_for(settings) as url:
        done = asyncio.run(
            simulate_turn(
                settings, url, tenant=tenant, text=message, customer=customer,
                new_conversation=new, in_process=in_process,
            )
        )  # fmt: skip
    result = done.result
    silent = "(silent: nothing is sent; the conversation is closed or with a person, --new starts another)"
    typer.echo(f"reply:    {result.reply}" if not result.silent else f"reply:    {silent}")
    fallback = " (after a fallback)" if result.fallback_used else ""
    typer.echo(f"model:    {result.model or '-'}{fallback}   via {done.via}")
    tools = ", ".join(f"{c.name}={c.outcome}" for c in result.tool_calls) or "none"
    typer.echo(f"tools:    {tools}")
    typer.echo(f"tokens:   {result.usage.total_tokens}   trace: {result.trace_id}")
    typer.echo(f"conversation: {done.conversation_id}")


if __name__ == "__main__":
    main()


def _agent_work(tenant: str, query: str | None, online: bool) -> Any:
    """Find the agent (by name or phone) of ``tenant`` and set its status (queue notices go to the outbox)."""
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.handoff import find_agent, set_status, write_outgoing
    from switchboard.runtime.resources import database_url_for
    from switchboard.tenants import get_tenant

    with database_url_for(_settings()) as url:

        async def go() -> Any:
            engine = create_engine(url, pool_size=1)
            sessions = session_factory(engine)
            try:
                async with sessions() as session:
                    tenant_row = await get_tenant(session, tenant)
                    agent = await find_agent(session, tenant_id=tenant_row.id, query=query or "")
                notices = await set_status(sessions, None, agent_id=agent.id, online=online, trace_id="cli")
                async with sessions() as session, session.begin():
                    await write_outgoing(session, tenant_id=tenant_row.id, items=notices)
                return agent, notices
            finally:
                await engine.dispose()

        return asyncio.run(go())


@agents_app.command("add")
@_friendly_errors
def agents_add(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
    name: Annotated[str, typer.Option(help="The agent's name as colleagues know it.")],
    phone: Annotated[
        str, typer.Option(help="The agent's WhatsApp number, international, e.g. +15550102030.")
    ],
    online: Annotated[bool, typer.Option("--online", help="Start online (default: offline).")] = False,
) -> None:
    """Add a human agent; their WhatsApp number becomes their console."""
    from switchboard.handoff import add_agent
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await add_agent(session, tenant_id=tenant_row.id, name=name, phone=phone, online=online)

    agent = _with_session(work)
    typer.echo(f"added agent {agent.name} +{agent.phone} ({agent.status}) id={agent.id}")


@agents_app.command("list")
@_friendly_errors
def agents_list(tenant: Annotated[str, typer.Option(help="Tenant slug or id.")]) -> None:
    """List agents: name, phone, status, open conversations, total conversations."""
    from switchboard.handoff import list_agents
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        return await list_agents(session, tenant_id=(await get_tenant(session, tenant)).id)

    for agent in _with_session(work):
        typer.echo(
            f"{agent.name:<24} +{agent.phone:<16} {agent.status:<8} "
            f"open={agent.current_load} total={agent.total_conversations}"
        )


@agents_app.command("online")
@_friendly_errors
def agents_online(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
    name: Annotated[str | None, typer.Option(help="The agent's name (or use --phone).")] = None,
    phone: Annotated[str | None, typer.Option(help="The agent's number.")] = None,
) -> None:
    """Put an agent online; every conversation waiting in the queue goes to them."""
    agent, notices = _agent_work(tenant, phone or name, online=True)
    typer.echo(f"{agent.name} is online; {len(notices)} waiting conversation(s) assigned")


@agents_app.command("offline")
@_friendly_errors
def agents_offline(
    tenant: Annotated[str, typer.Option(help="Tenant slug or id.")],
    name: Annotated[str | None, typer.Option(help="The agent's name (or use --phone).")] = None,
    phone: Annotated[str | None, typer.Option(help="The agent's number.")] = None,
) -> None:
    """Put an agent offline (refused while they still have open conversations)."""
    agent, _ = _agent_work(tenant, phone or name, online=False)
    typer.echo(f"{agent.name} is offline")
