"""``switchboard tenant settings show|set|edit|history``: a tenant's settings as data."""

from __future__ import annotations

import getpass
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from switchboard.cli.root import tenant_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, run_db

if TYPE_CHECKING:
    from switchboard.settings import Settings

__all__ = ["settings_app"]

settings_app = typer.Typer(
    help="A tenant's settings (agent, loop, llm, handoff, memory, tools, knowledge, locale, rate_limits and "
    "the channel sections): show them, set single values, or edit the whole document in $EDITOR. Every "
    "change is validated first and audited (`history`); secrets (model API keys) are encrypted on the way "
    'in and only ever shown as "set" / "not set". A stored key belongs to its address: changing a '
    "deployment's api_base or provider (or the embedding's base URL or provider) drops it, unless the new "
    "key is given in the same command.",
    no_args_is_help=True,
)
tenant_app.add_typer(settings_app, name="settings")

FormatOpt = Annotated[str, typer.Option("--format", "-f", help="yaml or json.")]


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _cipher_of(settings: Settings) -> Any:
    from switchboard.crypto import CredentialCipher

    return lambda: CredentialCipher(settings.secret("encryption_key").encode())


def _check_format(fmt: str) -> Any:
    if fmt not in ("yaml", "json"):
        raise fail(f"--format must be yaml or json, not {fmt!r}")
    return fmt


@settings_app.command("show")
@friendly_errors
def settings_show(
    tenant: TenantOpt,
    section: Annotated[str | None, typer.Option(help="Only this section (agent, llm, ...).")] = None,
    overrides: Annotated[
        bool, typer.Option("--overrides", help="Only what the tenant stored (no defaults).")
    ] = False,
    fmt: FormatOpt = "yaml",
) -> None:
    """Print the settings in force (defaults filled in, in the tenant's language); secrets as set / not set."""
    from switchboard.tenant_config import all_sections, effective_document, overrides_document
    from switchboard.tenant_config.render import dump_document
    from switchboard.tenants import get_tenant

    fmt = _check_format(fmt)
    if section is not None and section not in all_sections():
        raise fail(f"unknown section {section!r} (known: {', '.join(all_sections())})")

    async def work(sessions: Any, _settings: Any) -> dict:
        async with sessions() as session:
            row = await get_tenant(session, tenant)
        build = overrides_document if overrides else effective_document
        return build(row.settings_extensions)

    document = run_db(work)
    if section is not None:
        document = {section: document.get(section, {})}
    typer.echo(dump_document(document, fmt), nl=False)


def _parse_value(raw: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


@settings_app.command("set")
@friendly_errors
def settings_set(
    tenant: TenantOpt,
    assignments: Annotated[
        list[str],
        typer.Argument(
            help="PATH=VALUE pairs: agent.name=Sam, loop.max_tool_iterations=3, locale.language=es, "
            "llm.deployments\\[main].api_key=- (a VALUE of - asks for it without echo). VALUE is YAML "
            '(numbers, true/false, null = back to the default, \\[lists], {"mappings"}).',
        ),
    ],
) -> None:
    """Set single settings; the sections they touch are validated whole before anything is stored."""
    from switchboard.db.engine import session_scope
    from switchboard.tenant_config import assign_settings
    from switchboard.tenants import get_tenant

    values: dict[str, Any] = {}
    for item in assignments:
        path, sep, raw = item.partition("=")
        if not sep or not path.strip():
            raise fail(f"{item!r}: write PATH=VALUE, e.g. agent.name=Sam")
        if raw == "-":
            values[path.strip()] = typer.prompt(path.strip(), hide_input=True)
        else:
            values[path.strip()] = _parse_value(raw)

    async def work(sessions: Any, settings: Settings) -> Any:
        from switchboard.egress import EgressPolicy

        async with session_scope(sessions) as session:
            row = await get_tenant(session, tenant)
            return await assign_settings(
                session,
                row,
                values,
                actor=_actor(),
                source="cli",
                cipher=_cipher_of(settings),
                egress=EgressPolicy.for_models(settings),
            )

    change = run_db(work)
    if change is None:
        typer.echo("nothing changed")
    else:
        typer.echo(f"saved: {', '.join(change.changed_paths)}")


def _edit_text(text: str, suffix: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False, encoding="utf-8") as handle:
        handle.write(text)
        path = Path(handle.name)
    try:
        result = subprocess.run([*shlex.split(editor), str(path)], check=False)
        if result.returncode != 0:
            raise fail(f"the editor ({editor}) exited with status {result.returncode}: nothing saved")
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


@settings_app.command("edit")
@friendly_errors
def settings_edit(tenant: TenantOpt, fmt: FormatOpt = "yaml") -> None:
    """Open the whole settings document in $VISUAL / $EDITOR (default vi); validate; save and audit.

    When the document is invalid, every problem is listed with its path and the editor opens again
    on what you wrote (answer no to give up: nothing is saved).
    """
    from switchboard.db.engine import session_scope
    from switchboard.tenant_config import SettingsInvalid, all_sections, effective_document, save_settings
    from switchboard.tenant_config.render import EDIT_HEADER, dump_document, load_document
    from switchboard.tenants import get_tenant

    fmt = _check_format(fmt)

    async def load(sessions: Any, _settings: Any) -> Any:
        async with sessions() as session:
            return await get_tenant(session, tenant)

    row = run_db(load)
    original = dump_document(effective_document(row.settings_extensions), fmt)
    header = EDIT_HEADER.format(slug=row.slug, sections=", ".join(all_sections())) if fmt == "yaml" else ""
    text = header + original
    while True:
        edited = _edit_text(text, ".yaml" if fmt == "yaml" else ".json")
        if edited.strip() == text.strip():
            typer.echo("no changes")
            return
        try:
            document = load_document(edited, fmt)

            async def save(sessions: Any, settings: Settings, document: dict = document) -> Any:
                from switchboard.egress import EgressPolicy

                async with session_scope(sessions) as session:
                    fresh = await get_tenant(session, tenant)
                    return await save_settings(
                        session,
                        fresh,
                        document,
                        actor=_actor(),
                        source="cli",
                        cipher=_cipher_of(settings),
                        egress=EgressPolicy.for_models(settings),
                    )

            change = run_db(save)
        except SettingsInvalid as exc:
            typer.secho("the settings were not saved:", fg=typer.colors.RED, err=True)
            for problem in exc.problems:
                typer.secho(f"  {problem}", fg=typer.colors.RED, err=True)
            if not typer.confirm("edit again?", default=True, err=True):
                raise typer.Exit(2) from None
            text = edited
            continue
        typer.echo("nothing changed" if change is None else f"saved: {', '.join(change.changed_paths)}")
        return


@settings_app.command("history")
@friendly_errors
def settings_history(
    tenant: TenantOpt,
    limit: Annotated[int, typer.Option(help="Newest N changes.", min=1, max=1000)] = 20,
    details: Annotated[bool, typer.Option("--details", help="Print before/after of each change.")] = False,
) -> None:
    """Who changed which settings when (newest first); --details shows before/after, secrets redacted."""
    from switchboard.tenant_config import list_settings_changes
    from switchboard.tenant_config.render import dump_document
    from switchboard.tenants import get_tenant

    async def work(sessions: Any, _settings: Any) -> Any:
        async with sessions() as session:
            row = await get_tenant(session, tenant)
            return await list_settings_changes(session, row.id, limit=limit)

    for change in run_db(work):
        typer.echo(
            f"{change.created_at:%Y-%m-%d %H:%M:%S}Z  {change.actor:<24} {', '.join(change.changed_paths)}"
        )
        if details:
            typer.echo(dump_document({"before": change.before, "after": change.after}), nl=False)
