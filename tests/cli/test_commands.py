"""The `switchboard` command line against the test database."""

import uuid

import pytest
from switchboard.cli import app
from typer.testing import CliRunner


@pytest.fixture
def cli_env(database_url, redis_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    return CliRunner()


def test_version_and_help(cli_env):
    result = cli_env.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == "switchboard 0.1.0"
    result = cli_env.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "status", "db", "tenant"):
        assert command in result.stdout


def test_db_upgrade_is_idempotent(cli_env):
    result = cli_env.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "database at head" in result.stdout


def test_tenant_create_list_and_duplicate(cli_env):
    slug = f"acme-{uuid.uuid4().hex[:6]}"
    result = cli_env.invoke(app, ["tenant", "create", "--slug", slug, "--name", "Acme Bikes"])
    assert result.exit_code == 0, result.output
    assert f"created tenant {slug} id=" in result.stdout
    listed = cli_env.invoke(app, ["tenant", "list"])
    assert any(line.startswith(slug) and "Acme Bikes" in line for line in listed.stdout.splitlines())
    again = cli_env.invoke(app, ["tenant", "create", "--slug", slug, "--name", "Other"])
    assert again.exit_code == 2
    assert "already exists" in again.stderr


def test_tenant_create_rejects_bad_slug(cli_env):
    result = cli_env.invoke(app, ["tenant", "create", "--slug", "Bad Slug!", "--name", "X"])
    assert result.exit_code == 2
    assert "invalid slug" in result.stderr


def test_malformed_setting_fails_with_the_name(cli_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://nope")
    result = cli_env.invoke(app, ["tenant", "list"])
    assert result.exit_code == 2
    assert "DATABASE_URL" in result.stderr


def test_simulate_refuses_empty_or_blank_text(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from switchboard.cli import app as cli_app
    from typer.testing import CliRunner

    runner = CliRunner()
    for text in ("", "   \n"):
        out = runner.invoke(cli_app, ["simulate", "--new", text], env={"DATA_DIR": str(tmp_path)})
        assert out.exit_code == 2
        assert out.stderr.strip() == "error: the message is empty: give the text the customer writes"


def test_commands_do_not_create_a_database_in_the_wrong_folder(cli_env, monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "elsewhere"))
    result = cli_env.invoke(app, ["tenant", "list"])
    assert result.exit_code == 2
    assert "no Switchboard database in" in result.stderr
    assert "DATA_DIR" in result.stderr
    assert not (tmp_path / "elsewhere" / "postgres").exists()
