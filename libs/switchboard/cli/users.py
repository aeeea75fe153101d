"""``switchboard users add|invite|list|passwd|token``: people who log in to the web console."""

from __future__ import annotations

import getpass
from typing import Annotated, Any

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import users_app
from switchboard.cli.runner import command_settings, fail, friendly_errors, run_in_session

__all__ = ["users_add", "users_invite", "users_list", "users_passwd", "users_token"]

EmailArg = Annotated[str, typer.Argument(help="The user's e-mail address (their login).")]
PasswordOpt = Annotated[
    str | None,
    typer.Option(
        help="The password (at least 10 characters, not a commonly used one). Omitted: asked for without echo, or generated and "
        "printed once with --generate."
    ),
]
GenerateOpt = Annotated[
    bool, typer.Option("--generate", help="Generate a random password and print it once.")
]


def _password(password: str | None, generate: bool) -> tuple[str, bool]:
    from switchboard.users import generate_password

    if password:
        return password, False
    if generate:
        return generate_password(), True
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Password again: "):
        raise fail("the two passwords differ")
    return first, False


@users_app.command("add")
@friendly_errors
def users_add(
    email: EmailArg,
    role: Annotated[
        str,
        typer.Option(help="platform_admin (every tenant, no --tenant), tenant_admin or agent (inbox only)."),
    ] = "agent",
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Tenant slug (or id); not for a platform admin.")
    ] = None,
    name: Annotated[str, typer.Option(help="The name shown in the console.")] = "",
    password: PasswordOpt = None,
    generate: GenerateOpt = False,
) -> None:
    """Add a console user with a role (and tenant, unless a platform admin)."""
    from switchboard.tenants import get_tenant
    from switchboard.users import ROLES, create_user

    if role not in ROLES:
        raise fail(f"unknown role {role!r}: choose {', '.join(ROLES)}")
    secret, shown = _password(password, generate)

    async def work(session: Any) -> Any:
        tenant_id = (await get_tenant(session, tenant)).id if tenant else None
        return await create_user(
            session, email=email, password=secret, role=role, tenant_id=tenant_id, name=name
        )

    user = run_in_session(work)
    typer.echo(
        f"added {user.role} {user.email}" + (f" (tenant {tenant})" if tenant else "") + f" id={user.id}"
    )
    if shown:
        typer.echo(f"password: {secret}  (shown once)")


@users_app.command("invite")
@friendly_errors
def users_invite(
    email: EmailArg,
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Tenant slug (or id).")],
    role: Annotated[str, typer.Option(help="tenant_admin or agent (inbox only).")] = "agent",
    name: Annotated[str, typer.Option(help="The name shown in the console (they may change it).")] = "",
) -> None:
    """Invite someone to a tenant's console: prints a link (shown once) where they choose their own
    password. It works once, until CONSOLE_INVITE_TTL_S (72 hours) has passed; the console's People
    page can send a new one or withdraw it."""
    from switchboard.tenants import get_tenant
    from switchboard.users import create_invite

    settings = command_settings()

    async def work(session: Any) -> Any:
        tenant_row = await get_tenant(session, tenant)
        return await create_invite(
            session,
            tenant_id=tenant_row.id,
            email=email,
            role=role,
            name=name,
            ttl_s=settings.console_invite_ttl_s,
        )

    issued = run_in_session(work, settings=settings)
    base = settings.console_public_url or settings.service_url(settings.console_port)
    typer.echo(f"invited {issued.invite.role} {issued.invite.email} (tenant {tenant})")
    typer.echo(
        f"link: {base.rstrip('/')}{issued.path}  (shown once; works until "
        f"{issued.invite.expires_at:%Y-%m-%d %H:%M} UTC)"
    )


@users_app.command("list")
@friendly_errors
def users_list(
    tenant: Annotated[str | None, typer.Option("--tenant", "-t", help="Only this tenant's users.")] = None,
    output: OutputOpt = Output.table,
    quiet: QuietOpt = False,
) -> None:
    """List console users: e-mail, role, tenant, active, last login."""
    from sqlmodel import select

    from switchboard.db.models import Tenant
    from switchboard.tenants import get_tenant
    from switchboard.users import list_users

    async def work(session: Any) -> Any:
        tenant_id = (await get_tenant(session, tenant)).id if tenant else None
        users = await list_users(session, tenant_id=tenant_id)
        slugs = {t.id: t.slug for t in (await session.exec(select(Tenant))).all()}
        return [(u, slugs.get(u.tenant_id, "-")) for u in users]

    found = run_in_session(work)
    if output != Output.table or quiet:
        rows = [
            {
                "id": u.id,
                "email": u.email,
                "role": u.role,
                "tenant": slug,
                "active": u.is_active,
                "last_login_at": u.last_login_at,
            }
            for u, slug in found
        ]
        print_rows(
            rows,
            columns=["id", "email", "role", "tenant", "active", "last_login_at"],
            output=output,
            quiet=quiet,
        )
        return
    for user, slug in found:
        last = user.last_login_at.strftime("%Y-%m-%d %H:%M") if user.last_login_at else "never"
        state = "active" if user.is_active else "disabled"
        typer.echo(f"{user.email:<36} {user.role:<15} {slug:<20} {state:<8} last login {last}")


@users_app.command("passwd")
@friendly_errors
def users_passwd(
    email: EmailArg,
    password: PasswordOpt = None,
    generate: GenerateOpt = False,
    revoke_tokens: Annotated[
        bool,
        typer.Option(
            "--revoke-tokens",
            help="Also revoke the user's API tokens (sbu_...); without it they keep working.",
        ),
    ] = False,
) -> None:
    """Set a user's password; their open sessions end. Their API tokens keep working unless
    --revoke-tokens is given."""
    from switchboard.users import active_api_tokens, revoke_api_tokens, set_password

    secret, shown = _password(password, generate)

    async def work(session: Any) -> Any:
        user = await set_password(session, email=email, password=secret)
        if revoke_tokens:
            return user, await revoke_api_tokens(session, user_id=user.id), 0
        return user, 0, await active_api_tokens(session, user_id=user.id)

    user, revoked, still_valid = run_in_session(work)
    typer.echo(f"password changed for {user.email}; their sessions ended")
    if revoke_tokens:
        typer.echo(f"API tokens revoked: {revoked}")
    elif still_valid:
        typer.echo(
            f"their {still_valid} API token(s) still work; `switchboard users passwd {user.email} "
            "--revoke-tokens` (or the console's account page) revokes them"
        )
    if shown:
        typer.echo(f"password: {secret}  (shown once)")


@users_app.command("token")
@friendly_errors
def users_token(
    email: EmailArg,
    name: Annotated[str, typer.Option(help="What the token is for (shown in lists).")] = "cli",
) -> None:
    """Create an admin API token (Authorization: Bearer sbu_...) for the user, printed once; it acts with
    the user's role and tenant."""
    from switchboard.users import UserNotFound, create_api_token, find_user

    async def work(session: Any) -> Any:
        user = await find_user(session, email)
        if user is None:
            raise UserNotFound(f"no console user with e-mail {email.strip().lower()}")
        return await create_api_token(session, user=user, name=name)

    typer.echo(run_in_session(work))
