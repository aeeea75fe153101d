"""``switchboard conversations list|show``: the console inbox and conversation page without a browser."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, print_rows
from switchboard.cli.root import conversations_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, human_duration, run_in_session, shorten

__all__ = ["conversations_list", "conversations_show"]


@conversations_app.command("list")
@friendly_errors
def conversations_list(
    tenant: TenantOpt,
    channel: Annotated[str | None, typer.Option(help="whatsapp, instagram or gmail.")] = None,
    mode: Annotated[str | None, typer.Option(help="ai, human, waiting (for a person) or closed.")] = None,
    assigned: Annotated[
        str | None, typer.Option(help="agent:<id> (WhatsApp agent) or user:<id> (console user).")
    ] = None,
    search: Annotated[
        str | None, typer.Option("--search", "-q", help="Text in the customer's name, number or messages.")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=1000, help="At most this many, newest activity first.")
    ] = 50,
    output: OutputOpt = Output.table,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Only the ids, one a line (-q is --search here).")
    ] = False,
) -> None:
    """List conversations, newest activity first: id, channel, mode, customer, last message."""
    from switchboard.console.inbox import InboxFilters, Mode, list_inbox
    from switchboard.tenants import get_tenant

    if mode is not None and mode not in {m.value for m in Mode}:
        raise fail(f"unknown mode {mode!r}: choose ai, human, waiting or closed")

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        filters = InboxFilters(
            channel=channel, mode=Mode(mode) if mode else None, assigned=assigned, q=search
        )
        return await list_inbox(session, tenant_id=tenant_row.id, filters=filters, limit=limit)

    rows = run_in_session(work)
    if output != Output.table or quiet:
        columns = [
            "id",
            "last_at",
            "channel",
            "mode",
            "customer",
            "last_from",
            "last_text",
            "assigned_to",
            "unread",
        ]
        found = [{**vars(row), "id": row.conversation_id, "mode": row.mode.value} for row in rows]
        print_rows(found, columns=columns, output=output, quiet=quiet)
        return
    if not rows:
        typer.echo("no conversations match")
        return
    width = min(max(len("CUSTOMER"), *(len(row.customer) for row in rows)), CUSTOMER_WIDTH)
    typer.echo(
        f"{'ID':<36}  {'LAST ACTIVITY':<16}  {'CHANNEL':<9} {'MODE':<7} {'CUSTOMER':<{width}}  LAST MESSAGE"
    )
    for row in rows:
        last = f"{(row.last_from + ': ') if row.last_from else ''}{row.last_text}"
        typer.echo(
            f"{row.conversation_id}  {row.last_at:%Y-%m-%d %H:%M}  {row.channel:<9} {row.mode.value:<7} "
            f"{shorten(row.customer, width):<{width}}  {shorten(last, LAST_MESSAGE_WIDTH)}"
        )


CUSTOMER_WIDTH = 48
"""Widest customer column of ``conversations list`` (characters); a longer name ends in "…"."""
LAST_MESSAGE_WIDTH = 60
"""Characters of the last message ``conversations list`` shows."""


@conversations_app.command("show")
@friendly_errors
def conversations_show(
    tenant: TenantOpt,
    conversation_id: Annotated[
        str, typer.Argument(help="The conversation's id (from `conversations list`).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="The admin API's JSON instead of text.")] = False,
) -> None:
    """Show a conversation: messages (who, when, delivery), AI turns (model, fallback, tools, tokens,
    latency, trace id) and pending approvals."""
    from switchboard.console.api import detail_of
    from switchboard.console.inbox import conversation_view
    from switchboard.tenants import get_tenant

    try:
        wanted = uuid.UUID(conversation_id)
    except ValueError:
        raise fail(f"not a conversation id: {conversation_id!r}") from None

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await conversation_view(session, tenant_id=tenant_row.id, conversation_id=wanted)

    view = run_in_session(work)
    if view is None:
        raise fail(f"no conversation {wanted} in tenant {tenant}")
    if as_json:
        typer.echo(detail_of(view).model_dump_json(indent=2))
        return
    c = view.conversation
    typer.echo(
        f"{view.customer_label} · {c.channel} · {view.mode.value} · handled by {view.assigned_to or ('the AI' if view.mode.value == 'ai' else '-')}"
    )
    for m in view.messages:
        who = {"customer": "customer", "ai": "AI", "human": m.sender_name, "system": "system"}[
            m.kind_of_sender
        ]
        delivery = f"  [{', '.join(m.delivery)}]" if m.delivery else ""
        typer.echo(f"{m.at:%Y-%m-%d %H:%M:%S}  {who}: {m.text or '[' + m.kind + ']'}{delivery}")
        if m.turn:
            t = m.turn
            typer.echo(
                f"    turn: model={t.model} fallback={'yes' if t.fallback_used else 'no'} outcome={t.outcome} "
                f"tokens={t.tokens.get('total_tokens', '-')} latency={human_duration(t.latency_ms)} trace={t.trace_id}"
            )
            for call in t.tool_calls:
                typer.echo(
                    f"    tool {call.name} {call.arguments} -> {call.outcome} ({human_duration(call.duration_ms)})"
                )
    for a in view.pending_actions:
        typer.echo(f"pending approval {a.id}: {a.tool_name} {json.dumps(a.arguments, ensure_ascii=False)}")
