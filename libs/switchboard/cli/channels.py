"""``switchboard channel list``: the connected channel accounts (the channel packages add ``add-*``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from switchboard.cli.root import channel_app
from switchboard.cli.runner import command_settings, friendly_errors, run_in_session

__all__ = ["channel_list"]


@channel_app.command("list")
@friendly_errors
def channel_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Only this tenant (slug or id).")
    ] = None,
) -> None:
    """List connected accounts: tenant, channel, the provider's account id, active or not, whether a
    token is stored, and the API it talks to (the sandbox or the real one)."""
    from sqlmodel import select

    from switchboard.db.models import ChannelAccount, Tenant
    from switchboard.tenants import get_tenant

    settings = command_settings()

    async def work(session: Any) -> list[tuple[Any, Any]]:
        query = select(ChannelAccount, Tenant).where(ChannelAccount.tenant_id == Tenant.id)
        if tenant:
            query = query.where(Tenant.id == (await get_tenant(session, tenant)).id)
        rows = await session.exec(
            query.order_by(Tenant.slug, ChannelAccount.channel, ChannelAccount.external_account_id)
        )
        return list(rows.all())

    rows = run_in_session(work, settings=settings)
    if not rows:
        typer.echo(
            "no channel accounts: connect one with `switchboard channel add-whatsapp` (or add-instagram, add-gmail)"
        )
        return
    for account, owner in rows:
        api = (
            settings.channel_api_base_url(account.channel, account.api_base_url)
            if account.channel in ("whatsapp", "instagram")
            else settings.resolved_gmail_api_base_url
        )
        typer.echo(
            f"{owner.slug:<20} {account.channel:<10} {account.external_account_id:<28} "
            f"{'active' if account.is_active else 'inactive':<9} "
            f"token={'yes' if account.credentials_encrypted else 'no ':<3} api={api}"
        )
