"""A write that needs approval reaches a person, through the running tool server
(docs/tools.md#approvals).

The offline model (scripted, real HTTP) calls ``create_lead``; the tenant's stored configuration says
a person must approve; the real MCP server records the pending action; the orchestrator's tool source
notifies at once: the online agent's notice is in the outbox before the turn ends, and ``/approve``
from that agent runs the tool.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from sqlmodel import select
from switchboard.db.models import Lead, Outbox, PendingAction
from switchboard.handoff import parse_command, run_command
from switchboard.handoff.pending import APPROVAL_NOTICE_PREFIX, short_id
from switchboard.tools.toolbox import configure_tool

from tests.tools.test_orchestrator_mcp import orchestrator_with, request
from tests.utils.agent import deployment, llm_settings, text, tool_calls, unique_model
from tests.utils.handoff import make_agent


async def test_a_write_needing_approval_notifies_the_online_agent_who_approves_it(
    mcp_server, make_shop, offline_model, sessions, gateway, settings
):
    url, _ = mcp_server
    state, model_url = offline_model
    model = unique_model("approval")
    shop = await make_shop(llm=llm_settings(deployment(model_url, model)))
    async with sessions() as session, session.begin():
        await configure_tool(session, shop.tenant_id, "create_lead", {"needs_approval": True})
    agent = await make_agent(sessions, SimpleNamespace(id=shop.tenant_id), "Nia")
    state.script(model).push(
        tool_calls(("create_lead", {"interest": "200 mugs", "tool_config": {"needs_approval": False}})),
        text("A person will confirm your order of 200 mugs shortly."),
    )
    result = await orchestrator_with(sessions, gateway, url, settings).handle_turn(
        request(shop, "I want 200 mugs")
    )
    assert result.reply == "A person will confirm your order of 200 mugs shortly."
    async with sessions() as session:
        (action,) = (
            await session.exec(select(PendingAction).where(PendingAction.tenant_id == shop.tenant_id))
        ).all()
        notices = (await session.exec(select(Outbox).where(Outbox.tenant_id == shop.tenant_id))).all()
    assert action.status == "pending" and action.notified_at is not None
    assert [(n.recipient, n.payload["text"].startswith(APPROVAL_NOTICE_PREFIX)) for n in notices] == [
        (agent.phone, True)
    ]
    (answer,) = await run_command(
        sessions,
        None,
        agent_id=agent.id,
        command=parse_command(f"/approve {short_id(action.id)}"),
        console_conversation_id=uuid.uuid4(),
        trace_id="t",
    )
    assert answer.text.startswith(f"Approved {short_id(action.id)}: done")
    async with sessions() as session:
        leads = (await session.exec(select(Lead).where(Lead.tenant_id == shop.tenant_id))).all()
    assert [lead.interest for lead in leads] == ["200 mugs"]
