"""Human agents through the admin API and the ``switchboard agents`` CLI."""

from __future__ import annotations

import httpx
from switchboard.conversations import Actor
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, HumanAgent
from switchboard.handoff import escalate

from tests.utils.handoff import make_agent, make_customer_conversation, random_phone, reload
from tests.utils.rows import outbox_of


async def test_admin_api_adds_lists_and_sets_status(make_tenant, sessions, settings, orchestrator_url):
    tenant = await make_tenant()
    _, waiting = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        assert (
            await escalate(
                session, tenant_id=tenant.id, conversation_id=waiting.id, reason="r", actor=Actor.ai()
            )
        ).agent is None
    headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    phone = random_phone()
    async with httpx.AsyncClient(base_url=orchestrator_url, timeout=30, headers=headers) as client:
        unauthorized = await client.get(
            f"/v1/admin/tenants/{tenant.slug}/agents", headers={"Authorization": "x"}
        )
        created = await client.post(
            f"/v1/admin/tenants/{tenant.slug}/agents",
            json={"name": "Nia", "phone": f"+{phone[:4]} {phone[4:]}"},
        )
        duplicate = await client.post(
            f"/v1/admin/tenants/{tenant.slug}/agents", json={"name": "X", "phone": phone}
        )
        bad_phone = await client.post(
            f"/v1/admin/tenants/{tenant.slug}/agents", json={"name": "X", "phone": "012345678"}
        )
        no_tenant = await client.get("/v1/admin/tenants/no-such-tenant-xyz/agents")
        agent_id = created.json()["id"]
        online = await client.patch(
            f"/v1/admin/tenants/{tenant.slug}/agents/{agent_id}", json={"status": "online"}
        )
        offline = await client.patch(
            f"/v1/admin/tenants/{tenant.slug}/agents/{agent_id}", json={"status": "offline"}
        )
        listed = await client.get(f"/v1/admin/tenants/{tenant.slug}/agents")
    assert unauthorized.status_code == 401
    assert created.status_code == 201
    assert created.json()["phone"] == phone and created.json()["status"] == "offline"
    assert duplicate.status_code == 409 and bad_phone.status_code == 422 and no_tenant.status_code == 404
    assert online.status_code == 200
    assert (online.json()["status"], online.json()["current_load"]) == ("online", 1)
    assert offline.status_code == 409 and "open conversation" in offline.json()["detail"]
    assert [(a["name"], a["status"]) for a in listed.json()] == [("Nia", "online")]
    assert (await reload(sessions, Conversation, waiting.id)).assigned_agent_id.hex == agent_id.replace(
        "-", ""
    )
    [notice] = await outbox_of(sessions, tenant.id)
    assert notice.recipient == phone and notice.payload["audience"] == "agent"


async def test_cli_agents_add_list_online_offline(make_tenant, sessions, cli):
    tenant = await make_tenant()
    phone = random_phone()
    added = await cli.arun(
        *["agents", "add", "--tenant", tenant.slug, "--name", "Leo", "--phone", f"+{phone}"]
    )
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith(f"added agent Leo +{phone} (offline) id=")
    again = await cli.arun("agents", "add", "--tenant", tenant.slug, "--name", "Leo2", "--phone", phone)
    assert again.exit_code == 2 and "already exists" in again.output
    online = await cli.arun("agents", "online", "--tenant", tenant.slug, "--name", "leo")
    assert online.exit_code == 0, online.output
    assert online.stdout.strip() == "Leo is online; 0 waiting conversation(s) assigned"
    other = await make_agent(sessions, tenant, "Busy", online=True, total=99)
    _, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        await escalate(
            session, tenant_id=tenant.id, conversation_id=conversation.id, reason="r", actor=Actor.ai()
        )
    refused = await cli.arun("agents", "offline", "--tenant", tenant.slug, "--phone", phone)
    assert refused.exit_code == 2 and "open conversation" in refused.output
    listed = await cli.arun("agents", "list", "--tenant", tenant.slug)
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["Busy", f"+{other.phone}", "online", "open=0", "total=99"]
    assert lines[1].split() == ["Leo", f"+{phone}", "online", "open=1", "total=1"]
    unknown = await cli.arun("agents", "online", "--tenant", tenant.slug, "--name", "Nobody")
    assert unknown.exit_code == 2 and "no agent named" in unknown.output
    async with sessions() as session:
        assert (await session.get(HumanAgent, other.id)).status == "online"


async def test_cli_agents_add_online_takes_the_waiting_queue(make_tenant, sessions, cli):
    tenant = await make_tenant()
    _, waiting = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        queued = await escalate(
            session, tenant_id=tenant.id, conversation_id=waiting.id, reason="r", actor=Actor.ai()
        )
    assert queued.agent is None
    phone = random_phone()
    added = await cli.arun(
        "agents", "add", "--tenant", tenant.slug, "--name", "Nia", "--phone", f"+{phone}", "--online"
    )
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith(f"added agent Nia +{phone} (online) id=")
    assert added.stdout.strip().endswith("; 1 waiting conversation(s) assigned")
    conversation = await reload(sessions, Conversation, waiting.id)
    agent = await reload(sessions, HumanAgent, conversation.assigned_agent_id)
    assert (conversation.status, conversation.queued_at, agent.phone) == ("human", None, phone)
