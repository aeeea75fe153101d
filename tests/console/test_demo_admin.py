"""The demo tenant's console admin: created with a generated password that `switchboard run` prints once."""

from __future__ import annotations

from switchboard.cli.system import _print_ready
from switchboard.seed import DEMO_ADMIN_EMAIL, seed_demo_admin, seed_demo_if_empty
from switchboard.users import authenticate


async def test_the_demo_admin_logs_in_with_the_password_printed_once(scratch_database, settings, capsys):
    async with scratch_database.sessions() as session, session.begin():
        tenant = await seed_demo_if_empty(session)
        assert tenant is not None
        email, password = await seed_demo_admin(session, tenant)
    async with scratch_database.sessions() as session:
        user = await authenticate(session, email=email, password=password)
    assert user is not None and (user.email, user.role, user.tenant_id) == (
        DEMO_ADMIN_EMAIL,
        "tenant_admin",
        tenant.id,
    )
    _print_ready(settings, {}, 1.0, (email, password))
    first = capsys.readouterr().out
    assert f"/login  e-mail {DEMO_ADMIN_EMAIL}  password {password}  (shown once" in first
    _print_ready(settings, {}, 1.0, None)  # a later run: the database has tenants, nothing was seeded
    later = capsys.readouterr().out
    assert password not in later and f"Console: {settings.service_url(settings.console_port)}/login" in later
