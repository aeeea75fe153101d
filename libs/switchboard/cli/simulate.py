"""``switchboard simulate [turn] "message"``: one agent turn as a demo customer.

(``simulate whatsapp``, a signed webhook through the whole pipeline, is the WhatsApp channel's:
:mod:`switchboard.channels.whatsapp.cli`.)
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from switchboard.cli.root import simulate_app
from switchboard.cli.runner import command_settings, friendly_errors

__all__ = ["simulate_turn_command"]


@simulate_app.command("turn")  # `switchboard simulate "msg"` also lands here (see SimulateGroup)
@friendly_errors
def simulate_turn_command(
    message: Annotated[str, typer.Argument(help="What the customer writes.")],
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Tenant slug or id.")] = "demo",
    customer: Annotated[
        str, typer.Option(help="Simulated customer's name (one history per name).")
    ] = "demo-customer",
    new: Annotated[bool, typer.Option("--new", help="Start a new conversation.")] = False,
    in_process: Annotated[
        bool, typer.Option("--in-process", help="Run the turn here even if the orchestrator is running.")
    ] = False,
) -> None:
    """Send MESSAGE as a demo customer and print the agent's reply, the model and the tool calls.

    Uses the running orchestrator (`make run`) when it answers, otherwise runs the turn in this
    process (with the offline model when no provider key is configured). Example:
    switchboard simulate --tenant demo "Can I talk to a person?"
    """
    from switchboard.agent.simulate import simulate_turn
    from switchboard.runtime.resources import database_url_for

    if not message.strip():
        raise ValueError("the message is empty: give the text the customer writes")
    settings = command_settings()
    with database_url_for(settings) as url:
        done = asyncio.run(
            simulate_turn(
                settings,
                url,
                tenant=tenant,
                text=message,
                customer=customer,
                new_conversation=new,
                in_process=in_process,
            )
        )
    result = done.result
    silent = "(silent: nothing is sent; the conversation is closed or with a person, --new starts another)"
    typer.echo(f"reply:    {result.reply}" if not result.silent else f"reply:    {silent}")
    fallback = " (after a fallback)" if result.fallback_used else ""
    typer.echo(f"model:    {result.model or '-'}{fallback}   via {done.via}")
    tools = ", ".join(f"{c.name}={c.outcome}" for c in result.tool_calls) or "none"
    typer.echo(f"tools:    {tools}")
    typer.echo(f"tokens:   {result.usage.total_tokens}   trace: {result.trace_id}")
    typer.echo(f"conversation: {done.conversation_id}")
