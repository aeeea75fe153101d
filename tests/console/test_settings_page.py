"""The agent settings page: the whole settings as a form, validated, audited, secrets write-only."""

from __future__ import annotations

from switchboard.crypto import CredentialCipher
from switchboard.db.models import Role, Tenant
from switchboard.tenant_settings import load_tenant_settings

from tests.utils.console import log_in, new_user
from tests.utils.html_forms import form_values
from tests.utils.tenants import without_test_defaults


async def _stored(sessions, tenant_id) -> dict:
    async with sessions() as session:
        return without_test_defaults((await session.get(Tenant, tenant_id)).settings_extensions)


async def test_saving_the_form_unchanged_stores_nothing(console_client, sessions, make_tenant):
    tenant = await make_tenant(agent={"name": "Sam"})
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        assert page.status_code == 200 and "<h1>Agent settings</h1>" in page.text
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        assert values["agent.name"] == "Sam" and values["loop.max_tool_iterations"] == "5"
        saved = await client.post(f"/t/{tenant.slug}/settings", data=values)
        assert saved.status_code == 200, saved.text[:2000]
        assert "Nothing changed." in saved.text
    assert await _stored(sessions, tenant.id) == {"agent": {"name": "Sam"}}
    assert me.user.email  # logged in as the admin throughout


async def test_the_form_adds_a_deployment_with_a_write_only_key_and_records_who(
    console_client, sessions, make_tenant, settings
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {
                "agent.instructions": "Answer like a pirate.",
                "llm.deployments.0.id": "main",
                "llm.deployments.0.model": "gpt-4o-mini",
                "llm.deployments.0.api_key": "sk-form-secret",
                "locale.language": "es",
                "save_anyway": "1",  # the provider is not reachable from the tests: saved untested
            }
        )
        saved = await client.post(f"/t/{tenant.slug}/settings", data=values)
        assert saved.status_code == 200, saved.text[:2000]
        assert "sk-form-secret" not in saved.text
        # the page is now in the tenant's language, and the key shows only as set
        assert "Ajustes guardados: Instrucciones, Modelos, Idioma." in saved.text, saved.text
        assert "(establecida)" in saved.text and "Guardado: llm" not in saved.text
        assert f"console:{admin.email}" in saved.text  # the change in the audit table
    stored = await _stored(sessions, tenant.id)
    assert stored["agent"] == {"instructions": "Answer like a pirate."}
    assert stored["locale"] == {"language": "es"}
    token = stored["llm"]["deployments"][0]["api_key_encrypted"]
    assert CredentialCipher(settings.secret("encryption_key").encode()).decrypt(token) == {
        "api_key": "sk-form-secret"
    }


async def test_an_invalid_form_shows_every_problem_and_keeps_what_was_typed(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        values.update(
            {"loop.max_tool_iterations": "500", "agent.name": "Typed name", "locale.timezone": "Mars/Base"}
        )
        refused = await client.post(f"/t/{tenant.slug}/settings", data=values)
    assert refused.status_code == 422
    assert "loop.max_tool_iterations" in refused.text and "unknown time zone" in refused.text
    assert 'value="Typed name"' in refused.text
    assert await _stored(sessions, tenant.id) == {}


async def test_agents_may_not_open_the_settings_and_other_tenants_see_nothing(
    console_client, sessions, make_tenant
):
    tenant, other = await make_tenant(), await make_tenant()
    agent = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    outsider = await new_user(sessions, role=Role.tenant_admin, tenant_id=other.id)
    async with console_client() as client:
        await log_in(client, agent)
        assert (await client.get(f"/t/{tenant.slug}/settings")).status_code == 403
    async with console_client() as client:
        await log_in(client, outsider)
        assert (await client.get(f"/t/{tenant.slug}/settings")).status_code == 404
    async with console_client() as client:
        platform = await log_in(client, await new_user(sessions, role=Role.platform_admin, tenant_id=None))
        assert (await client.get(f"/t/{tenant.slug}/settings")).status_code == 200
        assert (
            await platform.post_form(f"/t/{tenant.slug}/settings/deployments/none/test")
        ).status_code == 404


async def test_stored_lists_of_plain_values_show_as_lines_and_save_unchanged(
    console_client, sessions, make_tenant
):
    """Holidays, websites and button ids are lists of plain values, not rows of models with secrets."""
    tenant = await make_tenant(
        hours={"holidays": ["2026-12-25", "2027-01-01"]},
        web={"allowed_origins": ["https://shop.example.com"]},
        handoff={"button_payloads": ["TALK_TO_PERSON"]},
    )
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        assert page.status_code == 200, page.text[:2000]
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        assert values["hours.holidays"].split() == ["2026-12-25", "2027-01-01"]
        assert values["web.allowed_origins"].split() == ["https://shop.example.com"]
        saved = await client.post(f"/t/{tenant.slug}/settings", data=values)
    assert saved.status_code == 200 and "Nothing changed." in saved.text, saved.text[:2000]


async def test_the_settings_form_takes_teams_per_channel_and_refuses_a_line_in_words(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/settings")
        values = form_values(page.text, f"/t/{tenant.slug}/settings")
        assert values["handoff.channel_teams"] == "" and values["handoff.default_team"] == ""
        refused = await client.post(
            f"/t/{tenant.slug}/settings",
            data={**values, "handoff.channel_teams": "telegram = Billing"},
            headers={"Accept-Language": "es"},
        )
        saved = await client.post(
            f"/t/{tenant.slug}/settings",
            data={
                **values,
                "handoff.channel_teams": "whatsapp = Billing\nweb = Web Desk",
                "handoff.default_team": "Sales",
            },
        )
    assert refused.status_code == 422
    assert "escriba un canal y el nombre de un equipo, como whatsapp = Facturación" in refused.text
    assert saved.status_code == 200, saved.text[:2000]
    async with sessions() as session:
        handoff = (await load_tenant_settings(session, tenant.id)).handoff
    assert (handoff.channel_teams, handoff.default_team) == (
        ["whatsapp = Billing", "web = Web Desk"],
        "Sales",
    )
