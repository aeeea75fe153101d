"""``switchboard api-keys create|list|revoke``: a tenant's keys for the public API (``/api/v1``)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import api_keys_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, run_in_session

__all__ = ["api_keys_create", "api_keys_list", "api_keys_revoke"]


@api_keys_app.command("create")
@friendly_errors
def api_keys_create(
    tenant: TenantOpt,
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            "-s",
            help="A scope the key gets (repeat for more), e.g. conversations:read; `all` for every one.",
        ),
    ],
    name: Annotated[str, typer.Option(help="What the key is for (e.g. the shop's name).")] = "",
    expires_in_days: Annotated[
        int | None, typer.Option(min=1, max=3650, help="Stops working after this many days (default: never).")
    ] = None,
) -> None:
    """Create a tenant API key and print it once (only its SHA-256 is stored)."""
    from switchboard.db.models import utcnow
    from switchboard.tenants import get_tenant
    from switchboard.users import API_SCOPES, UnknownScope, create_tenant_key

    scopes = list(API_SCOPES) if "all" in scope else scope
    expires_at = utcnow() + timedelta(days=expires_in_days) if expires_in_days else None

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await create_tenant_key(
            session, tenant_id=tenant_row.id, scopes=scopes, name=name, expires_at=expires_at
        )

    try:
        key, row = run_in_session(work)
    except UnknownScope as exc:
        raise fail(str(exc)) from None
    typer.echo(
        f"created key {row.id} ({row.prefix}...) with {', '.join(row.scopes)}"
        + (f", expires {row.expires_at:%Y-%m-%d}" if row.expires_at else "")
    )
    typer.echo(f"key: {key}  (shown once: store it now)")


@api_keys_app.command("list")
@friendly_errors
def api_keys_list(
    tenant: TenantOpt,
    output: OutputOpt = Output.table,
    quiet: QuietOpt = False,
    all_: Annotated[bool, typer.Option("--all", help="Revoked and expired ones too.")] = False,
) -> None:
    """List the tenant's API keys and its users' API tokens: prefix, scopes, created by, last used, expiry."""
    from switchboard.tenants import get_tenant
    from switchboard.users import list_credentials

    async def work(session: Any) -> Any:
        return await list_credentials(session, tenant_id=(await get_tenant(session, tenant)).id)

    rows = [
        {
            "id": c.id,
            "kind": c.kind,
            "name": c.name,
            "prefix": c.prefix,
            "scopes": c.scopes,
            "created_by": c.created_by,
            "created_at": c.created_at,
            "last_used_at": c.last_used_at,
            "expires_at": c.expires_at,
            "state": "active" if c.active else ("revoked" if c.revoked_at else "expired"),
        }
        for c in run_in_session(work)
        if all_ or c.active
    ]
    columns = [
        "id",
        "kind",
        "name",
        "prefix",
        "scopes",
        "created_by",
        "created_at",
        "last_used_at",
        "expires_at",
        "state",
    ]
    print_rows(rows, columns=columns, output=output, quiet=quiet, empty="no API keys")


@api_keys_app.command("revoke")
@friendly_errors
def api_keys_revoke(
    tenant: TenantOpt,
    key_id: Annotated[str, typer.Argument(help="The key's or user token's id (from `api-keys list`).")],
) -> None:
    """Revoke a key (or a user's API token) at once: its next request is refused."""
    from switchboard.tenants import get_tenant
    from switchboard.users import CredentialNotFound, revoke_credential

    try:
        wanted = uuid.UUID(key_id)
    except ValueError:
        raise fail(f"not a key id: {key_id!r}") from None

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await revoke_credential(session, tenant_id=tenant_row.id, credential_id=wanted)

    try:
        kind = run_in_session(work)
    except CredentialNotFound:
        raise fail(f"no API key or token {wanted} in tenant {tenant}") from None
    typer.echo(f"revoked {'key' if kind == 'key' else 'user token'} {wanted}")
