"""``switchboard agents add|list|online|offline|remove``: human agents (their WhatsApp is their console)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import agents_app
from switchboard.cli.runner import TenantOpt, friendly_errors, run_db, run_in_session

__all__ = ["agents_add", "agents_list", "agents_online", "agents_offline", "agents_remove"]

NameOpt = Annotated[str | None, typer.Option(help="The agent's name (or use --phone).")]
PhoneOpt = Annotated[str | None, typer.Option(help="The agent's number.")]


def _set_status(tenant: str, query: str | None, online: bool) -> Any:
    """Find the agent (by name or phone) of ``tenant`` and set its status (queue notices go to the outbox)."""
    from switchboard.handoff import find_agent, set_status, write_outgoing
    from switchboard.tenants import get_tenant

    async def work(sessions: Any, settings: Any) -> Any:
        async with sessions() as session:
            tenant_row = await get_tenant(session, tenant)
            agent = await find_agent(session, tenant_id=tenant_row.id, query=query or "")
        notices = await set_status(sessions, None, agent_id=agent.id, online=online, trace_id="cli")
        async with sessions() as session, session.begin():
            await write_outgoing(session, tenant_id=tenant_row.id, items=notices)
        return agent, notices

    return run_db(work, pool_size=1)


@agents_app.command("add")
@friendly_errors
def agents_add(
    tenant: TenantOpt,
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
        # added offline, then put online like `agents online`: the waiting queue goes to them
        return await add_agent(session, tenant_id=tenant_row.id, name=name, phone=phone, online=False)

    agent = run_in_session(work)
    if online:
        agent, notices = _set_status(tenant, agent.phone, online=True)
        typer.echo(
            f"added agent {agent.name} +{agent.phone} (online) id={agent.id}; "
            f"{len(notices)} waiting conversation(s) assigned"
        )
        return
    typer.echo(f"added agent {agent.name} +{agent.phone} ({agent.status}) id={agent.id}")


@agents_app.command("list")
@friendly_errors
def agents_list(tenant: TenantOpt, output: OutputOpt = Output.table, quiet: QuietOpt = False) -> None:
    """List agents: name, phone, status, open conversations, total conversations."""
    from switchboard.handoff import list_agents
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        return await list_agents(session, tenant_id=(await get_tenant(session, tenant)).id)

    agents = run_in_session(work)
    if output != Output.table or quiet:
        columns = ["id", "name", "phone", "status", "current_load", "total_conversations"]
        print_rows([a.model_dump() for a in agents], columns=columns, output=output, quiet=quiet)
        return
    for agent in agents:
        typer.echo(
            f"{agent.name:<24} +{agent.phone:<16} {agent.status:<8} "
            f"open={agent.current_load} total={agent.total_conversations}"
        )


@agents_app.command("online")
@friendly_errors
def agents_online(tenant: TenantOpt, name: NameOpt = None, phone: PhoneOpt = None) -> None:
    """Put an agent online; every conversation waiting in the queue goes to them."""
    agent, notices = _set_status(tenant, phone or name, online=True)
    typer.echo(f"{agent.name} is online; {len(notices)} waiting conversation(s) assigned")


@agents_app.command("offline")
@friendly_errors
def agents_offline(tenant: TenantOpt, name: NameOpt = None, phone: PhoneOpt = None) -> None:
    """Put an agent offline (refused while they still have open conversations)."""
    agent, _ = _set_status(tenant, phone or name, online=False)
    typer.echo(f"{agent.name} is offline")


@agents_app.command("remove")
@friendly_errors
def agents_remove(tenant: TenantOpt, name: NameOpt = None, phone: PhoneOpt = None) -> None:
    """Remove an agent (refused while a conversation is still assigned to them); history stays."""
    from switchboard.handoff import remove_agent
    from switchboard.tenants import get_tenant

    if not (name or phone):
        raise ValueError("give --name or --phone")

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await remove_agent(session, tenant_id=tenant_row.id, query=phone or name or "")

    agent = run_in_session(work)
    typer.echo(f"removed agent {agent.name} +{agent.phone}")
