"""The `switchboard` command line against the test database."""

import uuid


def test_version_and_help(cli):
    result = cli.run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == "switchboard 0.1.0"
    result = cli.run("--help")
    assert result.exit_code == 0
    for command in ("run", "status", "db", "tenant"):
        assert command in result.stdout


def test_help_reflows_a_docstring_paragraph_to_the_terminal(cli):
    """Docstrings are wrapped at 100 columns in the source; --help joins a paragraph's lines and wraps
    it to the terminal's width, instead of showing each source line break inside the box."""
    wide = cli.run("simulate", "whatsapp", "--help", COLUMNS="400")
    assert wide.exit_code == 0, wide.output
    # one paragraph of the docstring, over two source lines, on one line of a wide terminal
    assert "can be posted again. When the webhook stored nothing new, or the payload holds no" in wide.stdout
    narrow = cli.run("kb", "add", "--help", COLUMNS="60")
    lines = [line.strip() for line in narrow.stdout.splitlines()]
    assert "Exit status 1 when any file failed." not in lines  # its own source line: joined to the paragraph
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60


def test_db_upgrade_is_idempotent(cli):
    result = cli.run("db", "upgrade")
    assert result.exit_code == 0, result.output
    assert "database at head" in result.stdout


def test_tenant_create_list_and_duplicate(cli):
    slug = f"acme-{uuid.uuid4().hex[:6]}"
    result = cli.run("tenant", "create", "--slug", slug, "--name", "Acme Bikes")
    assert result.exit_code == 0, result.output
    assert f"created tenant {slug} id=" in result.stdout
    listed = cli.run("tenant", "list")
    assert any(line.startswith(slug) and "Acme Bikes" in line for line in listed.stdout.splitlines())
    again = cli.run("tenant", "create", "--slug", slug, "--name", "Other")
    assert again.exit_code == 2
    assert "already exists" in again.stderr


def test_tenant_create_rejects_bad_slug(cli):
    result = cli.run("tenant", "create", "--slug", "Bad Slug!", "--name", "X")
    assert result.exit_code == 2
    assert "invalid slug" in result.stderr


def test_malformed_setting_fails_with_the_name(cli):
    result = cli.run("tenant", "list", DATABASE_URL="mysql://nope")
    assert result.exit_code == 2
    assert "DATABASE_URL" in result.stderr


def test_simulate_refuses_empty_or_blank_text(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for text in ("", "   \n"):
        out = cli.run("simulate", "--new", text, DATABASE_URL=None, REDIS_URL=None, DATA_DIR=str(tmp_path))
        assert out.exit_code == 2
        assert out.stderr.strip() == "error: the message is empty: give the text the customer writes"


def test_commands_do_not_create_a_database_in_the_wrong_folder(cli, tmp_path):
    result = cli.run("tenant", "list", DATABASE_URL=None, DATA_DIR=str(tmp_path / "elsewhere"))
    assert result.exit_code == 2
    assert "no Switchboard database in" in result.stderr
    assert "DATA_DIR" in result.stderr
    assert not (tmp_path / "elsewhere" / "postgres").exists()


async def test_channel_list_has_a_header_and_says_a_sandbox_account_needs_no_token(
    cli, make_tenant, sessions, settings
):
    from switchboard.console.channel_pages import channel_health
    from switchboard.crypto import CredentialCipher
    from switchboard.tenants import add_channel_account

    tenant = await make_tenant()
    sandbox, real, tokened = (str(uuid.uuid4().int)[:15] for _ in range(3))
    async with sessions() as session, session.begin():
        for number, base, credentials in (
            (sandbox, "sandbox", None),
            (real, "", None),  # the real Graph API and no token: every send would fail
            (tokened, "", {"access_token": "EAAG-x"}),
        ):
            await add_channel_account(
                session,
                tenant=tenant,
                channel="whatsapp",
                external_account_id=number,
                api_base_url=base,
                credentials=credentials,
                cipher=CredentialCipher.from_settings(settings),
            )
    env = {"WHATSAPP_GRAPH_BASE_URL": None, "WHATSAPP_PORT": str(settings.whatsapp_port)}
    result = await cli.arun("channel", "list", "--tenant", tenant.slug, **env)
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["TENANT", "CHANNEL", "ACCOUNT", "STATUS", "TOKEN", "API"]
    tokens = {row.split()[2]: row.split("token=")[1].split(" api=")[0].strip() for row in rows}
    assert tokens == {sandbox: "not needed (sandbox)", real: "missing", tokened: "stored"}
    assert header.index("TOKEN") == rows[0].index("token=") and header.index("API") == rows[0].index("api=")
    async with sessions() as session:  # the console's Channels page says the same
        health = await channel_health(session, tenant.id, settings=settings)
    shown = {a["external_account_id"]: (a["token_label"], a["token_ok"]) for a in health["whatsapp"]}
    assert shown == {
        sandbox: ("not needed (sandbox)", True),
        real: ("missing", False),
        tokened: ("stored", True),
    }
