"""Tools (enable/disable, configuration), channels (account health) and people pages."""

from __future__ import annotations

from switchboard.db.models import Outbox, Role
from switchboard.handoff import add_agent
from switchboard.tools.toolbox import list_assignments

from tests.utils.agent import make_conversation
from tests.utils.console import log_in, new_user
from tests.utils.handoff import random_phone
from tests.utils.whatsapp import connect_whatsapp


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


async def test_channels_page_shows_each_accounts_health(console_client, sessions, make_tenant, settings):
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    conv = await make_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        session.add(
            Outbox(
                tenant_id=tenant.id, conversation_id=conv.conversation.id, channel="whatsapp",
                channel_account_id=account.id, recipient="15550100099", status="failed",
                error_code="131047", error_message="Re-engagement message",
            )
        )  # fmt: skip
    admin = await new_user(sessions, role=Role.tenant_admin, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, admin)
        page = await client.get(f"/t/{tenant.slug}/channels")
    assert page.status_code == 200
    assert f'data-account="{account.external_account_id}"' in page.text
    assert "131047: Re-engagement message" in page.text and 'data-token="stored"' in page.text
    assert "never" in page.text  # no webhook received yet


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
