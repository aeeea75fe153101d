"""``switchboard customers erase|export``: erase one customer everywhere, or export what is stored about them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from switchboard.cli.root import customers_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, run_db

__all__ = ["customers_erase", "customers_export"]

CustomerArg = Annotated[
    str,
    typer.Argument(help="The customer: their id, phone number (with or without +), e-mail address or IGSID."),
]


async def _customer(sessions: Any, tenant: str, ref: str) -> tuple[uuid.UUID, uuid.UUID]:
    from switchboard.privacy import find_customer
    from switchboard.tenants import get_tenant

    async with sessions() as session:
        tenant_row = await get_tenant(session, tenant)
        customer = await find_customer(session, tenant_row.id, ref)
    if customer is None:
        raise fail(f"no customer {ref!r} in tenant {tenant}")
    return tenant_row.id, customer.id


@customers_app.command("erase")
@friendly_errors
def customers_erase(
    tenant: TenantOpt,
    customer: CustomerArg,
    confirm: Annotated[
        str | None,
        typer.Option(help="The same identity again, to confirm without a prompt (scripts)."),
    ] = None,
) -> None:
    """Erase a customer everywhere: their messages and media files, memory, leads, turn records, events and
    every other trace of them are deleted or anonymized; counts stay, an audit record says who erased which
    customer id. Cannot be undone. A run that was interrupted completes when run again."""
    typed = confirm if confirm is not None else typer.prompt(f"Type {customer} again to erase this customer")
    if typed.strip() != customer.strip():
        raise fail("the identity typed does not match: nothing was erased")

    async def work(sessions: Any, settings: Any) -> Any:
        from switchboard.media.store import MediaStore
        from switchboard.privacy import erase_customer

        tenant_id, customer_id = await _customer(sessions, tenant, customer)
        return await erase_customer(
            sessions,
            tenant_id=tenant_id,
            customer_id=customer_id,
            actor="cli",
            store=MediaStore.from_settings(settings),
        )

    report = run_db(work)
    if report.already_erased:
        typer.echo(f"customer {report.customer_id} was already erased")
        return
    typer.echo(
        f"erased customer {report.customer_id}: {sum(report.counts.values())} rows cleaned, "
        f"{report.media_files} media files deleted"
    )


@customers_app.command("export")
@friendly_errors
def customers_export(
    tenant: TenantOpt,
    customer: CustomerArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The ZIP file to write.")] = Path(
        "customer-export.zip"
    ),
) -> None:
    """Export everything stored about a customer: a ZIP with customer.json (identities, conversations with
    every message, memory, leads, meetings, orders) and their media files."""

    async def work(sessions: Any, settings: Any) -> bytes:
        from switchboard.media.store import MediaStore
        from switchboard.privacy.export import audit_export, export_customer

        tenant_id, customer_id = await _customer(sessions, tenant, customer)
        data = await export_customer(
            sessions, tenant_id=tenant_id, customer_id=customer_id, store=MediaStore.from_settings(settings)
        )
        await audit_export(sessions, tenant_id=tenant_id, customer_id=customer_id, actor="cli")
        return data

    data = run_db(work)
    out.write_bytes(data)
    typer.echo(f"wrote {out} ({len(data)} bytes)")
