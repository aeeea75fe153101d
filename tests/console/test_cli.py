"""``switchboard users add|list|passwd|token`` and ``switchboard conversations list|show``."""

from __future__ import annotations

import uuid

from switchboard.users import authenticate

from tests.utils.handoff import make_customer_conversation


async def test_users_add_list_passwd_and_token(cli, sessions, make_tenant):
    tenant = await make_tenant()
    email = f"pat-{uuid.uuid4().hex[:6]}@Example.com"
    added = await cli.arun(
        "users",
        "add",
        email,
        "--role",
        "agent",
        "--tenant",
        tenant.slug,
        "--name",
        "Pat",
        "--password",
        "first password 1",
    )
    assert added.exit_code == 0, added.output
    assert f"added agent {email.lower()} (tenant {tenant.slug})" in added.output
    listed = await cli.arun("users", "list", "--tenant", tenant.slug)
    assert (
        listed.exit_code == 0
        and email.lower() in listed.output
        and "agent" in listed.output
        and "never" in listed.output
    )
    changed = await cli.arun("users", "passwd", email, "--generate")
    assert changed.exit_code == 0, changed.output
    new_password = changed.output.split("password: ")[1].split()[0]
    async with sessions() as session:
        assert await authenticate(session, email=email, password="first password 1") is None
        assert (await authenticate(session, email=email, password=new_password)) is not None
    token = await cli.arun("users", "token", email)
    assert token.exit_code == 0 and token.output.strip().startswith("sbu_")


async def test_users_add_refuses_bad_input_in_one_line(cli, make_tenant):
    tenant = await make_tenant()
    short = await cli.arun("users", "add", "a@example.com", "--tenant", tenant.slug, "--password", "short")
    assert short.exit_code == 2 and "at least 10 characters" in short.output
    no_tenant = await cli.arun(
        "users", "add", "b@example.com", "--role", "tenant_admin", "--password", "x" * 12
    )
    assert no_tenant.exit_code == 2 and "belongs to a tenant" in no_tenant.output
    role = await cli.arun("users", "add", "c@example.com", "--role", "boss", "--password", "x" * 12)
    assert role.exit_code == 2 and "unknown role 'boss'" in role.output
    email = f"dup-{uuid.uuid4().hex[:6]}@example.com"
    assert (
        await cli.arun("users", "add", email, "--tenant", tenant.slug, "--password", "y" * 12)
    ).exit_code == 0
    again = await cli.arun("users", "add", email, "--tenant", tenant.slug, "--password", "y" * 12)
    assert again.exit_code == 2 and "exists already" in again.output


async def test_conversations_list_and_show(cli, sessions, make_tenant):
    tenant = await make_tenant()
    _, conversation = await make_customer_conversation(
        sessions, tenant, name="Ana Lima", texts=("Where is A-1001?",)
    )
    _, long_named = await make_customer_conversation(
        sessions,
        tenant,
        name="Maria Fernanda de Souza Albuquerque (Valves & Fittings Ltda.)",
        texts=("Line one\nline two " + "x" * 80,),
    )
    listed = await cli.arun("conversations", "list", "--tenant", tenant.slug)
    assert listed.exit_code == 0, listed.output
    header, *lines = listed.output.splitlines()
    assert header.split() == ["ID", "LAST", "ACTIVITY", "CHANNEL", "MODE", "CUSTOMER", "LAST", "MESSAGE"]
    (ana,) = [line for line in lines if line.startswith(str(conversation.id))]
    assert "Ana Lima" in ana and ana.endswith("Where is A-1001?")
    (long,) = [line for line in lines if line.startswith(str(long_named.id))]
    # cut at the column's width with an ellipsis, the message on one line
    assert (
        "  Maria Fernanda de Souza Albuquerque (Valves & F…  customer: " in long
        and "Line one line two xxx" in long
    )
    assert long.endswith("x…") and len(long.split("  ")[-1]) == 60
    assert header.index("LAST MESSAGE") == ana.index("customer: Where is A-1001?")  # aligned columns
    assert (
        "no conversations match"
        in (await cli.arun("conversations", "list", "-t", tenant.slug, "--mode", "closed")).output
    )
    shown = await cli.arun("conversations", "show", "--tenant", tenant.slug, str(conversation.id))
    assert (
        shown.exit_code == 0 and "customer: Where is A-1001?" in shown.output and " · ai · " in shown.output
    )
    as_json = await cli.arun("conversations", "show", "-t", tenant.slug, str(conversation.id), "--json")
    assert '"mode": "ai"' in as_json.output
    missing = await cli.arun("conversations", "show", "-t", tenant.slug, str(uuid.uuid4()))
    assert missing.exit_code == 2 and "no conversation" in missing.output


async def test_users_invite_prints_a_link_that_opens_the_set_password_page(cli, make_tenant, console_client):
    tenant = await make_tenant()
    email = f"kai-{uuid.uuid4().hex[:6]}@example.com"
    invited = await cli.arun("users", "invite", email, "--tenant", tenant.slug, "--role", "tenant_admin")
    assert invited.exit_code == 0, invited.output
    assert f"invited tenant_admin {email} (tenant {tenant.slug})" in invited.output
    path = "/invite/" + invited.output.split("/invite/")[1].split()[0]
    async with console_client() as client:
        page = await client.get(path)
    assert page.status_code == 200 and email in page.text
    refused = await cli.arun(
        "users", "invite", "x@example.com", "--tenant", tenant.slug, "--role", "platform_admin"
    )
    assert refused.exit_code != 0 and "cannot be invited" in refused.output
