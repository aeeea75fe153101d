"""The root ``switchboard`` command, its groups, and the console-script entry point.

Command modules (and channel packages, for ``channel`` and ``simulate``) add their commands to the
groups defined here; :mod:`switchboard.cli` imports them all.
"""

from __future__ import annotations

import sys
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from switchboard import __version__

__all__ = [
    "app",
    "main",
    "cli_command",
    "agents_app",
    "channel_app",
    "data_app",
    "feedback_app",
    "db_app",
    "kb_app",
    "keys_app",
    "api_keys_app",
    "leads_app",
    "webhooks_app",
    "queue_app",
    "simulate_app",
    "tenant_app",
    "tools_app",
]

app = typer.Typer(
    name="switchboard",
    help="Switchboard: self-hostable, multi-tenant AI customer support (WhatsApp, Gmail, Instagram).",
    no_args_is_help=True,
    add_completion=False,
    # Docstrings are wrapped at 100 columns in the source: markdown joins a paragraph's lines and
    # reflows it to the terminal ("rich", typer's default, keeps every hard line break in the box).
    rich_markup_mode="markdown",
)


class SimulateGroup(TyperGroup):
    """``switchboard simulate``: subcommands (``whatsapp``, ``turn``); anything else is a ``turn``.

    Keeps ``switchboard simulate [--tenant demo] "message"`` (one agent turn) working next to
    ``switchboard simulate whatsapp ...`` (a signed webhook through the whole pipeline).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if (
            args
            and args[0] not in self.commands
            and args[0] not in ("--help", "-h")
            and "turn" in self.commands
        ):
            args = ["turn", *args]
        return super().parse_args(ctx, args)


db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
tenant_app = typer.Typer(help="Tenants: the businesses Switchboard answers for.", no_args_is_help=True)
data_app = typer.Typer(
    help="Business data the tools read (catalog, orders, stores, meeting slots).", no_args_is_help=True
)
tools_app = typer.Typer(
    help="Per-tenant MCP toolboxes: which tools a tenant's agent may call.", no_args_is_help=True
)
kb_app = typer.Typer(
    help="Knowledge base: add documents (PDF, DOCX, XLSX, CSV, TXT, Markdown), search, manage.",
    no_args_is_help=True,
)
agents_app = typer.Typer(
    help="Human agents: staff who take over conversations from their own WhatsApp.", no_args_is_help=True
)
leads_app = typer.Typer(
    help="Sales leads the agent recorded (one per conversation with buying intent).", no_args_is_help=True
)
webhooks_app = typer.Typer(
    help="Event webhooks: HTTPS endpoints of your own systems that receive signed events "
    "(conversation.created, message.created, conversation.handed_off, conversation.closed, lead.created, "
    "approval.requested, feedback.created).",
    no_args_is_help=True,
)
keys_app = typer.Typer(help="Encryption keys of the stored credentials.", no_args_is_help=True)
api_keys_app = typer.Typer(
    help="Tenant API keys for the public API (/api/v1): create (shown once), list, revoke.",
    no_args_is_help=True,
)
users_app = typer.Typer(
    help="Web console users: platform admins (every tenant), tenant admins and agents (the inbox).",
    no_args_is_help=True,
)
conversations_app = typer.Typer(
    help="Conversations as the console inbox shows them: list with filters, show one with its turns.",
    no_args_is_help=True,
)
templates_app = typer.Typer(
    help="WhatsApp message templates: list what is stored, refresh them from WhatsApp.", no_args_is_help=True
)
customers_app = typer.Typer(
    help="Customers' data: erase one customer everywhere, or export everything stored about them.",
    no_args_is_help=True,
)
queue_app = typer.Typer(help="The job queues: depth (what the ECS workers scale on).", no_args_is_help=True)
channel_app = typer.Typer(
    help="Channel accounts: connect a WhatsApp number, an Instagram account or a Gmail mailbox.",
    no_args_is_help=True,
)
simulate_app = typer.Typer(
    cls=SimulateGroup,
    help="Try the system without Meta or Google: `simulate whatsapp` / `simulate instagram` post a signed webhook "
    "through the whole pipeline, `simulate gmail` delivers a mail to the Gmail sandbox and pushes it; "
    '`simulate "message"` (or `simulate turn "message"`) runs one agent turn.',
    no_args_is_help=True,
)

feedback_app = typer.Typer(
    help="Feedback on the agent's messages: the tenant app's key for POST /v1/messages/{id}/feedback.",
    no_args_is_help=True,
)

for _group, _name in (
    (db_app, "db"),
    (tenant_app, "tenant"),
    (data_app, "data"),
    (tools_app, "tools"),
    (kb_app, "kb"),
    (agents_app, "agents"),
    (keys_app, "keys"),
    (api_keys_app, "api-keys"),
    (users_app, "users"),
    (conversations_app, "conversations"),
    (templates_app, "templates"),
    (customers_app, "customers"),
    (leads_app, "leads"),
    (webhooks_app, "webhooks"),
    (queue_app, "queue"),
    (channel_app, "channel"),
    (simulate_app, "simulate"),
    (feedback_app, "feedback"),
):
    app.add_typer(_group, name=_name)


@app.callback(invoke_without_command=True)
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(f"switchboard {__version__}")
        raise typer.Exit(0)
    # Every command logs to stderr (stdout stays clean for JSON lines and tables); `run`
    # reconfigures at LOG_LEVEL, the others only show warnings and errors.
    import os

    from switchboard.observability import configure_logging

    # readable lines for a person; LOG_FORMAT=json forces JSON (a script parsing stderr)
    fmt = "json" if os.environ.get("LOG_FORMAT", "").strip().lower() == "json" else "auto"
    configure_logging(service="cli", level="WARNING", fmt=fmt, interactive=True)


# The modules whose import registers commands on :data:`app` and its groups. `switchboard run`,
# `status` and `version` need only ``system``: importing every module costs ~0.9 s CPU (the channel
# CLIs, the knowledge and eval commands), paid at every `make run`.
COMMAND_MODULES = (
    "switchboard.channels.gmail.cli",
    "switchboard.channels.instagram.cli",
    "switchboard.channels.whatsapp.cli",
    *(
        f"switchboard.cli.{name}"
        for name in (
            "agents api_keys channels conversations customers db evals events kb keys outreach queue settings simulate "
            "system tenants tools users"
        ).split()
    ),
)
FAST_COMMANDS = frozenset({"run", "status", "version"})


def load_commands(argv: list[str] | None = None) -> None:
    """Import the command modules: only ``system`` when ``argv`` (arguments after the program name)
    starts with one of :data:`FAST_COMMANDS`, else all of :data:`COMMAND_MODULES` (so ``--help`` and
    every other command see the whole tree). Importing twice is free."""
    import importlib

    if argv and argv[0] in FAST_COMMANDS:
        importlib.import_module("switchboard.cli.system")
        return
    for module in COMMAND_MODULES:
        importlib.import_module(module)


def cli_command(argv: list[str] | None = None) -> click.Command:
    """The click command tree of :data:`app` with readable placeholders in every help page: a flag shows
    none (Typer prints ``<bool>``), a text option or argument its own name (``--tenant TENANT`` instead
    of ``<str>``). Numbers, paths and choices keep Typer's (``<int>``, ``<path>``, ``a|b``).

    Loads the command modules first (:func:`load_commands`): the whole tree unless ``argv`` names a
    command of :data:`FAST_COMMANDS`."""
    load_commands(argv)
    command = typer.main.get_command(app)
    _readable_placeholders(command)
    return command


def _readable_placeholders(command: click.Command) -> None:
    for param in command.params:
        if param.metavar is not None or not hasattr(param, "bare_type"):
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""  # a flag takes no value: nothing to show
        elif param.bare_type() in ("str", "list[str]") and not param.type_descriptor.is_choice and param.name:
            param.metavar = param.name.upper()
            if param.param_type_name == "argument":  # its name is its placeholder; Typer adds <str> beside it
                param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
    help_option = command.get_help_option(click.Context(command))  # cached on the command (click >= 8.1.8)
    if help_option is not None:
        help_option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _readable_placeholders(sub)


def main() -> None:
    """Console-script entry point: errors a user can act on (Switchboard errors, bad files and values,
    database state) become one line on stderr and exit status 2 instead of a traceback."""
    from switchboard.cli.runner import EXIT_ERROR, describe_error

    try:
        cli_command(sys.argv[1:])(prog_name="switchboard")
    except Exception as exc:
        message = describe_error(exc)
        if message is None:
            raise
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
        sys.exit(EXIT_ERROR)
