"""Tools (enable/disable, configuration) and people pages (channels: test_channel_pages.py)."""

from __future__ import annotations

from switchboard.db.models import Role
from switchboard.handoff import add_agent
from switchboard.tools.toolbox import list_assignments

from tests.utils.console import log_in, new_user
from tests.utils.handoff import random_phone


async def test_tools_page_enables_configures_and_refuses_bad_json(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with sessions() as session:
        name = (await list_assignments(session, tenant.id))[0].tool_name
    async with console_client() as client:
        me = await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/tools")
        assert page.status_code == 200 and f'data-tool="{name}" data-enabled="no"' in page.text
        on = await me.post_form(f"/t/{tenant.slug}/tools/{name}", {"enabled": "on"})
        assert f'data-tool="{name}" data-enabled="yes"' in on.text
        bad = await me.post_form(f"/t/{tenant.slug}/tools/{name}", {"custom_config": "{not json"})
        assert bad.status_code == 422 and "not JSON" in bad.text
        ok = await me.post_form(f"/t/{tenant.slug}/tools/{name}", {"custom_config": '{"limit": 3}'})
        assert ok.status_code == 200
    async with sessions() as session:
        tool = next(t for t in await list_assignments(session, tenant.id) if t.tool_name == name)
    assert tool.enabled and tool.custom_config == {"limit": 3}


async def test_people_page_lists_agents_with_state_and_load(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    async with sessions() as session, session.begin():
        await add_agent(session, tenant_id=tenant.id, name="Nia", phone=random_phone(), online=True)
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    agent_user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/people")
        assert page.status_code == 200 and 'data-agent="Nia"' in page.text and "online" in page.text
        assert agent_user.email in page.text
    async with console_client() as client:
        await log_in(client, agent_user)
        for path in ("tools", "channels", "people"):
            assert (await client.get(f"/t/{tenant.slug}/{path}")).status_code == 403, path
