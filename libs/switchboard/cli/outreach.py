"""``switchboard templates list|refresh`` and ``switchboard conversations start``: WhatsApp templates and
starting a conversation by phone without the API (:mod:`switchboard.outreach`)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import typer

from switchboard.cli.root import conversations_app, templates_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, run_db, shorten

__all__ = ["conversations_start", "templates_list", "templates_refresh"]

NumberOpt = Annotated[
    str | None,
    typer.Option("--number", help="The WhatsApp number's phone_number_id, when the tenant has several."),
]


async def _account(session: Any, tenant_id: uuid.UUID, number: str | None) -> Any:
    from sqlmodel import select

    from switchboard.db.models import ChannelAccount

    query = select(ChannelAccount).where(
        ChannelAccount.tenant_id == tenant_id, ChannelAccount.channel == "whatsapp"
    )
    if number:
        query = query.where(ChannelAccount.external_account_id == number)
    accounts = list((await session.exec(query)).all())
    if not accounts:
        raise fail(
            "no WhatsApp number of this tenant" + (f" is {number}" if number else ": connect one first")
        )
    if len(accounts) > 1:
        raise fail(f"the tenant has {len(accounts)} WhatsApp numbers: name one with --number")
    return accounts[0]


@templates_app.command("list")
@friendly_errors
def templates_list(tenant: TenantOpt, number: NumberOpt = None) -> None:
    """The stored templates: name, language, status, category and the values each takes."""
    from switchboard.channels.whatsapp.templates import list_templates, template_summary
    from switchboard.tenants import get_tenant

    async def work(sessions: Any, _settings: Any) -> list[dict[str, Any]]:
        async with sessions() as session:
            tenant_row = await get_tenant(session, tenant)
            account = await _account(session, tenant_row.id, number) if number else None
            rows = await list_templates(
                session, tenant_id=tenant_row.id, channel_account_id=account.id if account else None
            )
            return [template_summary(r) for r in rows]

    rows = run_db(work)
    if not rows:
        typer.echo("no templates stored: run `switchboard templates refresh --waba-id <id>`")
        return
    typer.echo(f"{'NAME':<28} {'LANGUAGE':<9} {'STATUS':<9} {'CATEGORY':<14} VALUES")
    for row in rows:
        values = f"body {len(row['body_values'])}" + (
            f", buttons {row['button_values']}" if row["button_values"] else ""
        )
        if row["header_format"] in ("IMAGE", "VIDEO", "DOCUMENT"):
            values += f", header {row['header_format'].lower()}"
        elif row["header_values"]:
            values += ", header text"
        typer.echo(
            f"{shorten(row['name'], 28):<28} {row['language']:<9} {row['status']:<9} {row['category']:<14} {values}"
        )


@templates_app.command("refresh")
@friendly_errors
def templates_refresh(
    tenant: TenantOpt,
    number: NumberOpt = None,
    waba_id: Annotated[
        str | None,
        typer.Option("--waba-id", help="The WhatsApp Business Account id (default: the last one)."),
    ] = None,
) -> None:
    """List the templates from WhatsApp again and store them (replacing what was stored)."""
    from switchboard.channels.whatsapp.send import GraphSendError
    from switchboard.channels.whatsapp.templates import TemplateRefused, refresh_account_templates, refusal_of
    from switchboard.tenants import get_tenant

    async def work(sessions: Any, settings: Any) -> tuple[int, int]:
        async with sessions() as session:
            tenant_row = await get_tenant(session, tenant)
            account = await _account(session, tenant_row.id, number)
            try:
                rows = await refresh_account_templates(session, settings, account=account, waba_id=waba_id)
            except TemplateRefused as exc:
                raise fail(str(exc)) from None
            except GraphSendError as exc:
                raise fail(refusal_of(exc)) from None
            await session.commit()
            return len(rows), sum(r.status.upper() == "APPROVED" for r in rows)

    total, approved = run_db(work)
    typer.echo(f"{total} templates stored, {approved} approved")


@conversations_app.command("start")
@friendly_errors
def conversations_start(
    tenant: TenantOpt,
    phone: Annotated[
        str, typer.Option("--phone", help="The customer's number, international form (+34 600 000 000).")
    ],
    template: Annotated[str | None, typer.Option("--template", help="An approved template's name.")] = None,
    language: Annotated[
        str | None, typer.Option("--language", help="The template's language (en_US, es...).")
    ] = None,
    value: Annotated[
        list[str] | None,
        typer.Option("--value", help="A body value, in order; name=value for named ones. Repeat."),
    ] = None,
    button: Annotated[
        list[str] | None, typer.Option("--button", help="The end of a URL button's link. Repeat.")
    ] = None,
    text: Annotated[
        str | None, typer.Option("--text", help="Free text (only within the 24-hour window).")
    ] = None,
    number: NumberOpt = None,
) -> None:
    """Write to a customer on WhatsApp: an approved template, or free text inside their 24-hour window.
    The message is queued in the outbox; the running workers send it."""
    from switchboard.channels.whatsapp.templates import TemplateValues
    from switchboard.outreach import OutreachRefused, TemplateChoice, start_conversation
    from switchboard.tenants import get_tenant

    values = list(value or [])
    named = bool(values) and all("=" in v for v in values)
    body: list[str] | dict[str, str] = dict(v.split("=", 1) for v in values) if named else values
    choice = (
        TemplateChoice(template, language, TemplateValues(body=body, buttons=list(button or [])))
        if template
        else None
    )

    async def work(sessions: Any, _settings: Any) -> Any:
        async with sessions() as session:
            tenant_row = await get_tenant(session, tenant)
            account = await _account(session, tenant_row.id, number) if number else None
            try:
                sent = await start_conversation(
                    session,
                    tenant_id=tenant_row.id,
                    phone=phone,
                    template=choice,
                    text=text,
                    channel_account_id=account.id if account else None,
                    sender={"sender": "cli"},
                )
            except OutreachRefused as exc:
                raise fail(str(exc)) from None
            await session.commit()
            return sent

    sent = run_db(work)
    typer.echo(
        f"queued ({sent.via}) in conversation {sent.conversation_id}"
        + (" with a new customer" if sent.created else "")
    )
