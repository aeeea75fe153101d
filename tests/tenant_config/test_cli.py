"""``switchboard tenant settings show|set|edit|history``: validated, secrets write-only, audited."""

from __future__ import annotations

import sys
import textwrap

import yaml
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Tenant
from switchboard.tenant_settings import tenant_settings_from

from tests.utils.tenants import without_test_defaults


async def _stored(sessions, tenant_id) -> dict:
    async with sessions() as session:
        return without_test_defaults((await session.get(Tenant, tenant_id)).settings_extensions)


async def test_set_encrypts_the_key_shows_it_as_set_and_audits_the_change(
    cli, make_tenant, sessions, settings
):
    tenant = await make_tenant()
    result = await cli.arun(
        "tenant",
        "settings",
        "set",
        "-t",
        tenant.slug,
        "agent.name=Sam",
        "loop.max_tool_iterations=3",
        'llm.deployments=[{"id": "main", "provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-test-123"}]',
    )
    assert result.exit_code == 0, result.output
    assert "agent.name" in result.output and "llm.deployments" in result.output

    stored = await _stored(sessions, tenant.id)
    assert stored["agent"] == {"name": "Sam"} and stored["loop"] == {"max_tool_iterations": 3}
    token = stored["llm"]["deployments"][0]["api_key_encrypted"]
    assert "sk-test-123" not in str(stored)
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    assert cipher.decrypt(token) == {"api_key": "sk-test-123"}

    shown = await cli.arun("tenant", "settings", "show", "-t", tenant.slug, "--section", "llm")
    assert shown.exit_code == 0, shown.output
    deployment = yaml.safe_load(shown.output)["llm"]["deployments"][0]
    assert deployment["api_key"] == "set" and "sk-test" not in shown.output and "gAAAA" not in shown.output

    # the key can be replaced without repeating the deployment; the old token is gone
    again = await cli.arun(
        "tenant", "settings", "set", "-t", tenant.slug, "llm.deployments[main].api_key=sk-new"
    )
    assert again.exit_code == 0, again.output
    new_token = (await _stored(sessions, tenant.id))["llm"]["deployments"][0]["api_key_encrypted"]
    assert cipher.decrypt(new_token) == {"api_key": "sk-new"}

    history = await cli.arun("tenant", "settings", "history", "-t", tenant.slug, "--details")
    assert history.exit_code == 0, history.output
    assert "cli:" in history.output and "llm.deployments" in history.output and "agent.name" in history.output
    assert "set (changed)" in history.output
    assert "sk-" not in history.output and "gAAAA" not in history.output


async def test_set_refuses_an_invalid_value_with_its_path_and_changes_nothing(cli, make_tenant, sessions):
    tenant = await make_tenant()
    result = await cli.arun(
        "tenant", "settings", "set", "-t", tenant.slug, "loop.max_tool_iterations=-2", "agent.nme=x"
    )
    assert result.exit_code == 2
    assert "loop.max_tool_iterations" in result.output and "greater than or equal to 1" in result.output
    assert "agent.nme: unknown setting" in result.output
    assert await _stored(sessions, tenant.id) == {}


async def test_show_fills_defaults_in_the_tenants_language(cli, make_tenant):
    tenant = await make_tenant(locale={"language": "es"})
    result = await cli.arun("tenant", "settings", "show", "-t", tenant.slug, "--format", "json")
    assert result.exit_code == 0, result.output
    assert '"handoff_reply": "Gracias. Una persona de nuestro equipo' in result.output
    assert '"api_key": "not set"' not in result.output  # no deployments stored: nothing to show
    overrides = await cli.arun("tenant", "settings", "show", "-t", tenant.slug, "--overrides")
    assert without_test_defaults(yaml.safe_load(overrides.output)) == {"locale": {"language": "es"}}


def _editor(tmp_path, body: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text(textwrap.dedent(body))
    return f"{sys.executable} {script}"


async def test_edit_validates_and_saves_the_edited_document(cli, make_tenant, sessions, tmp_path):
    tenant = await make_tenant()
    editor = _editor(
        tmp_path,
        """
        import sys
        path = sys.argv[1]
        text = open(path).read()
        text = text.replace("name: Assistant", "name: Lola").replace("\\n  language: en\\n", "\\n  language: es\\n")
        open(path, "w").write(text)
        """,
    )
    result = await cli.arun("tenant", "settings", "edit", "-t", tenant.slug, EDITOR=editor, VISUAL=None)
    assert result.exit_code == 0, result.output
    assert "saved:" in result.output
    stored = await _stored(sessions, tenant.id)
    assert stored == {"agent": {"name": "Lola"}, "locale": {"language": "es"}}  # defaults are not pinned
    assert tenant_settings_from(stored).agent.error_reply.startswith("Lo siento")


async def test_edit_lists_every_problem_and_saves_nothing_when_the_user_gives_up(
    cli, make_tenant, sessions, tmp_path
):
    tenant = await make_tenant()
    editor = _editor(
        tmp_path,
        """
        import sys
        path = sys.argv[1]
        text = open(path).read()
        text = text.replace("turn_timeout_s: 120.0", "turn_timeout_s: -1").replace("\\n  language: en\\n", "\\n  language: fr\\n")
        open(path, "w").write(text)
        """,
    )
    result = await cli.arun(
        "tenant", "settings", "edit", "-t", tenant.slug, EDITOR=editor, VISUAL=None, input="n\n"
    )
    assert result.exit_code == 2
    assert "loop.turn_timeout_s" in result.output and "locale.language" in result.output
    assert await _stored(sessions, tenant.id) == {}
