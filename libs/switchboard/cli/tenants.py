"""``switchboard tenant create|list``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import tenant_app
from switchboard.cli.runner import friendly_errors, run_in_session

__all__ = ["tenant_create", "tenant_list"]


@tenant_app.command("create")
@friendly_errors
def tenant_create(
    slug: Annotated[str, typer.Option(help="Unique short name: a-z, 0-9 and '-'.")],
    name: Annotated[str, typer.Option(help="Display name of the business.")],
    organization: Annotated[str | None, typer.Option(help="Organization name (default: NAME).")] = None,
) -> None:
    """Create a tenant and print its id. The knowledge tool (search_knowledge_base) is enabled at once;
    every other tool stays off until `switchboard tools enable`."""
    from switchboard.tenants import DEFAULT_TOOLS, create_tenant

    async def work(session: Any) -> Any:
        return await create_tenant(session, slug=slug, name=name, organization_name=organization)

    tenant = run_in_session(work)
    typer.echo(f"created tenant {tenant.slug} id={tenant.id}")
    typer.echo(
        f"enabled tools: {', '.join(DEFAULT_TOOLS)} (others: `switchboard tools list --tenant {tenant.slug}`, "
        "`switchboard tools enable`)"
    )


@tenant_app.command("list")
@friendly_errors
def tenant_list(output: OutputOpt = Output.table, quiet: QuietOpt = False) -> None:
    """List tenants: slug, id, name."""
    from switchboard.tenants import list_tenants

    tenants = run_in_session(list_tenants)
    if output != Output.table or quiet:
        rows = [{"id": t.id, "slug": t.slug, "name": t.name, "created_at": t.created_at} for t in tenants]
        print_rows(rows, columns=["id", "slug", "name", "created_at"], output=output, quiet=quiet)
        return
    for tenant in tenants:
        typer.echo(f"{tenant.slug:<20} {tenant.id}  {tenant.name}")
