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
    """List connected accounts, under a header line: tenant, channel, the provider's account id, its
    status (`active`, `inactive`, or `needs_reauth` for a Gmail mailbox to connect again), the token
    state (`stored`; `not needed (sandbox)` for an account on this deployment's sandbox; `missing`: a
    real API without a token, every send would fail; `needs_reauth`: the same one the console
    Channels page shows) and the API it talks to (the sandbox or the real one)."""
    from sqlmodel import select

    from switchboard.channels.accounts import account_token_state, token_state_label
    from switchboard.db.models import ChannelAccount, GmailMailbox, Tenant
    from switchboard.tenants import get_tenant

    settings = command_settings()

    async def work(session: Any) -> list[tuple[Any, Any, Any]]:
        query = (
            select(ChannelAccount, Tenant, GmailMailbox.status)
            .where(ChannelAccount.tenant_id == Tenant.id)
            .outerjoin(GmailMailbox, GmailMailbox.channel_account_id == ChannelAccount.id)
        )
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
    typer.echo(f"{'TENANT':<20} {'CHANNEL':<10} {'ACCOUNT':<28} {'STATUS':<12} {'TOKEN':<28} API")
    for account, owner, mailbox_status in rows:
        token = account_token_state(
            is_active=account.is_active,
            has_credentials=account.credentials_encrypted is not None,
            mailbox_status=mailbox_status,
            on_sandbox=settings.account_on_sandbox(account.channel, account.api_base_url),
        )
        state = "needs_reauth" if token == "needs_reauth" else ("active" if account.is_active else "inactive")
        api = (
            settings.channel_api_base_url(account.channel, account.api_base_url)
            if account.channel in ("whatsapp", "instagram")
            else settings.resolved_gmail_api_base_url
        )
        typer.echo(
            f"{owner.slug:<20} {account.channel:<10} {account.external_account_id:<28} "
            f"{state:<12} {'token=' + token_state_label(token):<28} api={api}"
        )
