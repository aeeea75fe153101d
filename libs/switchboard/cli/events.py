"""``switchboard leads list`` and ``switchboard webhooks add|list|enable|disable|deliveries``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import leads_app, webhooks_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, run_db, run_in_session

__all__ = ["leads_list", "webhooks_add", "webhooks_deliveries", "webhooks_list", "webhooks_set_active"]

EndpointArg = Annotated[str, typer.Argument(help="The endpoint's id (see `webhooks list`).")]


@leads_app.command("list")
@friendly_errors
def leads_list(
    tenant: TenantOpt,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many, newest first.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    output: OutputOpt = Output.table,
    quiet: QuietOpt = False,
) -> None:
    """List leads: when, consent, where it came from (intent check or tool), interest and summary."""
    from switchboard.leads import list_leads
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await list_leads(session, tenant_id=tenant_row.id, limit=limit)

    leads = run_in_session(work)
    if output != Output.table or quiet:
        columns = ["id", "created_at", "consent", "source", "detected_by", "interest", "summary", "status"]
        print_rows([lead.model_dump() for lead in leads], columns=columns, output=output, quiet=quiet)
        return
    if not leads:
        typer.echo("no leads yet")
    for lead in leads:
        if as_json:
            typer.echo(json.dumps(lead.model_dump(mode="json"), ensure_ascii=False))
            continue
        typer.echo(
            f"{lead.created_at:%Y-%m-%d %H:%M} {lead.id} consent={lead.consent} source={lead.source}"
            f" detected_by={lead.detected_by or '-'} interest={lead.interest or '-'!r} {lead.summary[:120]}"
        )


@webhooks_app.command("add")
@friendly_errors
def webhooks_add(
    tenant: TenantOpt,
    url: Annotated[str, typer.Option(help="https:// URL of your receiver (no private addresses).")],
    event: Annotated[
        list[str] | None, typer.Option("--event", help="An event type to receive (repeat); default: all.")
    ] = None,
    description: Annotated[str, typer.Option(help="What it is, for people.")] = "",
    signature: Annotated[
        str,
        typer.Option(help="switchboard (X-Switchboard-Signature) or standard (Standard Webhooks headers)."),
    ] = "switchboard",
) -> None:
    """Register an endpoint; prints its signing secret once (store it in the receiver)."""
    from switchboard.crypto import CredentialCipher
    from switchboard.egress import EgressPolicy
    from switchboard.events.endpoints import create_endpoint
    from switchboard.tenants import get_tenant

    async def work(sessions: Any, settings: Any) -> Any:
        async with sessions() as session, session.begin():
            tenant_row = await get_tenant(session, tenant)
            return await create_endpoint(
                session,
                tenant_id=tenant_row.id,
                url=url,
                event_types=list(event or []),
                description=description,
                cipher=CredentialCipher(settings.secret("encryption_key").encode()),
                egress=EgressPolicy.from_settings(settings),
                signature_scheme=signature,
            )

    endpoint, secret = run_db(work, pool_size=1)
    typer.echo(f"added endpoint {endpoint.id} {endpoint.url} events={endpoint.event_types or 'all'}")
    typer.echo(f"signing secret (shown once): {secret}")


@webhooks_app.command("rotate-secret")
@friendly_errors
def webhooks_rotate_secret(
    tenant: TenantOpt,
    endpoint_id: Annotated[str, typer.Argument(help="The endpoint's id (from `webhooks list`).")],
    overlap: Annotated[
        int,
        typer.Option(min=0, max=604_800, help="Seconds the current secret keeps signing too (0: stops now)."),
    ] = 86_400,
) -> None:
    """Give an endpoint a new signing secret (printed once); both sign until the overlap ends."""
    import uuid

    from switchboard.crypto import CredentialCipher
    from switchboard.db.models import WebhookEndpoint
    from switchboard.events.endpoints import previous_secret_until, rotate_secret
    from switchboard.tenants import get_tenant

    async def work(sessions: Any, settings: Any) -> Any:
        cipher = CredentialCipher(settings.secret("encryption_key").encode())
        async with sessions() as session, session.begin():
            tenant_row = await get_tenant(session, tenant)
            try:
                endpoint = await session.get(WebhookEndpoint, uuid.UUID(endpoint_id))
            except ValueError:
                endpoint = None
            if endpoint is None or endpoint.tenant_id != tenant_row.id:
                raise fail(f"no endpoint {endpoint_id} of this tenant")
            secret = rotate_secret(endpoint, cipher, overlap_s=overlap)
            session.add(endpoint)
            return secret, previous_secret_until(endpoint, cipher)

    secret, until = run_db(work, pool_size=1)
    typer.echo(f"new signing secret (shown once): {secret}")
    typer.echo(
        f"the previous secret signs too until {until:%Y-%m-%d %H:%M} UTC"
        if until
        else "the previous secret no longer signs"
    )


@webhooks_app.command("list")
@friendly_errors
def webhooks_list(tenant: TenantOpt, output: OutputOpt = Output.table, quiet: QuietOpt = False) -> None:
    """List endpoints: id, state (a disabled one says why), failures in a row, URL, events."""
    from switchboard.events.endpoints import list_endpoints
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        return await list_endpoints(session, tenant_id=(await get_tenant(session, tenant)).id)

    endpoints = run_in_session(work)
    if output != Output.table or quiet:
        columns = [
            "id",
            "url",
            "event_types",
            "is_active",
            "consecutive_failures",
            "disabled_reason",
            "created_at",
        ]
        print_rows([e.model_dump() for e in endpoints], columns=columns, output=output, quiet=quiet)
        return
    if not endpoints:
        typer.echo("no endpoints")
    for e in endpoints:
        state = "active" if e.is_active else f"DISABLED ({e.disabled_reason})"
        typer.echo(
            f"{e.id} {state} failures={e.consecutive_failures} {e.url} events={e.event_types or 'all'}"
        )


def _set_active(tenant: str, endpoint_id: str, active: bool) -> None:
    import uuid

    from switchboard.db.models import WebhookEndpoint
    from switchboard.errors import SwitchboardError
    from switchboard.events.endpoints import set_endpoint_active
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        endpoint = await session.get(WebhookEndpoint, uuid.UUID(endpoint_id))
        if endpoint is None or endpoint.tenant_id != tenant_row.id:
            raise SwitchboardError(f"no endpoint {endpoint_id} for tenant {tenant!r}")
        set_endpoint_active(endpoint, active, reason=None if active else "disabled by an admin")
        session.add(endpoint)
        return endpoint

    endpoint = run_in_session(work)
    typer.echo(f"endpoint {endpoint.id} {'enabled' if active else 'disabled'}")


@webhooks_app.command("enable")
@friendly_errors
def webhooks_set_active(tenant: TenantOpt, endpoint_id: EndpointArg) -> None:
    """Enable an endpoint (a disabled one's waiting deliveries go out again)."""
    _set_active(tenant, endpoint_id, True)


@webhooks_app.command("disable")
@friendly_errors
def webhooks_disable(tenant: TenantOpt, endpoint_id: EndpointArg) -> None:
    """Disable an endpoint (its events wait until it is enabled)."""
    _set_active(tenant, endpoint_id, False)


@webhooks_app.command("deliveries")
@friendly_errors
def webhooks_deliveries(
    tenant: TenantOpt, endpoint_id: EndpointArg, limit: Annotated[int, typer.Option(min=1, max=500)] = 20
) -> None:
    """The endpoint's delivery log: event, status, attempts, last answer."""
    import uuid

    from sqlmodel import col, select

    from switchboard.db.models import WebhookDelivery
    from switchboard.tenants import get_tenant

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        rows = await session.exec(
            select(WebhookDelivery)
            .where(
                WebhookDelivery.tenant_id == tenant_row.id,
                WebhookDelivery.endpoint_id == uuid.UUID(endpoint_id),
            )
            .order_by(col(WebhookDelivery.created_at).desc())
            .limit(limit)
        )
        return list(rows.all())

    for d in run_in_session(work):
        typer.echo(
            f"{d.created_at:%Y-%m-%d %H:%M:%S} {d.event_type} {d.status} attempts={d.attempts}"
            f" last={d.last_status_code or '-'} {d.last_error or ''}".rstrip()
        )
