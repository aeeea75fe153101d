"""``switchboard tools list|enable|disable|configure`` and ``switchboard data import``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import data_app, tools_app
from switchboard.cli.runner import TenantOpt, friendly_errors, run_in_session

__all__ = ["data_import", "tools_list", "tools_enable", "tools_disable", "tools_configure"]


@data_app.command("import")
@friendly_errors
def data_import(
    tenant: TenantOpt,
    kind: Annotated[str, typer.Option(help="products | orders | stores | slots")],
    file: Annotated[str, typer.Argument(help="CSV file, header row first (docs/tools.md#business-data).")],
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the valid rows even when some are rejected.")
    ] = False,
) -> None:
    """Import a CSV for a tenant: every row validated, rejected rows reported with line and reason.

    One transaction: by default a file with any rejected row imports nothing (exit status 1).
    Rows are upserts (by SKU, order number, store name+city, slot start+resource).
    """
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

    report = run_in_session(work)
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


def _for_tenant(tenant: str, change: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    """``change(session, tenant_id)`` in one transaction."""
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        return await change(session, (await get_tenant(session, tenant)).id)

    return run_in_session(work)


@tools_app.command("list")
@friendly_errors
def tools_list(tenant: TenantOpt, output: OutputOpt = Output.table, quiet: QuietOpt = False) -> None:
    """List the tools of a tenant: name, enabled, read/write, configuration (``-q``: the names)."""
    from switchboard.tools.toolbox import list_assignments

    items = _for_tenant(tenant, list_assignments)
    if output != Output.table or quiet:
        rows = [
            {"tool_name": i.tool_name, "enabled": i.enabled, "kind": i.kind, "custom_config": i.custom_config}
            for i in items
        ]
        print_rows(
            rows,
            columns=list(rows[0]) if rows else ["tool_name"],
            output=output,
            quiet=quiet,
            id_column="tool_name",
        )
        return
    for item in items:
        state = "enabled " if item.enabled else "disabled"
        typer.echo(f"{item.tool_name:<24} {state} {item.kind or '?':<5} {json.dumps(item.custom_config)}")


@tools_app.command("enable")
@friendly_errors
def tools_enable(tenant: TenantOpt, tool: Annotated[str, typer.Argument(help="Tool name.")]) -> None:
    """Let a tenant's agent see and call TOOL."""
    from switchboard.tools.toolbox import set_enabled

    _for_tenant(tenant, lambda s, t: set_enabled(s, t, tool, enabled=True, actor="admin:cli"))
    typer.echo(f"{tool} enabled for {tenant}")


@tools_app.command("disable")
@friendly_errors
def tools_disable(tenant: TenantOpt, tool: Annotated[str, typer.Argument(help="Tool name.")]) -> None:
    """Hide TOOL from a tenant's agent; a call to it then fails closed (Forbidden + security alert)."""
    from switchboard.tools.toolbox import set_enabled

    _for_tenant(tenant, lambda s, t: set_enabled(s, t, tool, enabled=False, actor="admin:cli"))
    typer.echo(f"{tool} disabled for {tenant}")


@tools_app.command("configure")
@friendly_errors
def tools_configure(
    tenant: TenantOpt,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    config: Annotated[str, typer.Option("--config", help="JSON object, e.g. '{\"needs_approval\": true}'.")],
) -> None:
    """Replace the custom_config a tenant's TOOL receives as tool_config."""
    from switchboard.tools.toolbox import configure_tool

    try:
        parsed = json.loads(config)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config is not valid JSON: {exc.msg}") from None
    _for_tenant(tenant, lambda s, t: configure_tool(s, t, tool, parsed, actor="admin:cli"))
    typer.echo(f"{tool} configured for {tenant}: {json.dumps(parsed)}")
