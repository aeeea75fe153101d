"""Pending actions decided in the console (page form and admin API): the tool runs once on approval,
a rejection is audited, and a second decision changes nothing."""

from __future__ import annotations

import uuid

from sqlmodel import select
from switchboard.db.engine import session_scope
from switchboard.db.models import AuditLog, Lead, PendingAction, Role
from switchboard.tools.toolbox import set_enabled

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation, reload


async def _pending(sessions, tenant, customer, conversation) -> PendingAction:  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        action = PendingAction(
            tenant_id=tenant.id,
            tool_name="create_lead",
            arguments={"interest": "200 mugs", "notes": ""},
            customer_id=customer.id,
            conversation_id=conversation.id,
            trace_id="trace-console-approval",
            idempotency_key=f"k-{uuid.uuid4().hex}",
        )
        session.add(action)
    return action


async def test_approve_on_the_page_runs_the_tool_once_and_reject_by_api_is_audited(
    console_client, sessions, make_tenant
):
    tenant = await make_tenant()
    customer, conversation = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        await set_enabled(session, tenant.id, "create_lead", enabled=True)
    first = await _pending(sessions, tenant, customer, conversation)
    second = await _pending(sessions, tenant, customer, conversation)
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id, name="Pat")
    base = f"/t/{tenant.slug}/conversations/{conversation.id}"
    async with console_client() as client:
        me = await log_in(client, user)
        page = await client.get(base)
        assert f'id="pa-{first.id}"' in page.text and "Approve" in page.text and "200 mugs" in page.text
        approved = await me.post_form(f"{base}/approvals/{first.id}", {"decision": "approve"})
        assert approved.status_code == 303 and "Approved" in approved.headers["location"]
        again = await me.post_form(f"{base}/approvals/{first.id}", {"decision": "approve"})
        assert "already+approved" in again.headers["location"]
        api = f"/v1/admin/tenants/{tenant.slug}/conversations/{conversation.id}/approvals/{second.id}"
        rejected = await client.post(
            api,
            json={"approve": False, "reason": "not now"},
            headers={"X-CSRF-Token": me.csrf, "Accept": "application/json"},
        )
        assert rejected.status_code == 200, rejected.text
        assert rejected.json()["conversation"]["pending_actions"] == []
        twice = await client.post(api, json={"approve": True}, headers={"X-CSRF-Token": me.csrf})
        assert twice.status_code == 409 and "already rejected" in twice.json()["detail"]
    async with sessions() as session:
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == tenant.id))).all()
        audits = (await session.exec(select(AuditLog).where(AuditLog.tenant_id == tenant.id))).all()
    assert len(leads) == 1
    assert sorted((a.actor, a.action) for a in audits if a.action.startswith("pending_action")) == [
        ("console_user", "pending_action.approved"),
        ("console_user", "pending_action.rejected"),
    ]
    assert (await reload(sessions, PendingAction, first.id)).decided_by == f"console_user:{user.id}"
