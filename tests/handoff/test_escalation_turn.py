"""escalate_to_human inside a real turn (offline model over HTTP): assignment, LLM summary, queue reply."""

from __future__ import annotations

from sqlmodel import select
from switchboard.db.models import AuditLog, Conversation
from switchboard.handoff import HANDOFF_SUMMARY_INSTRUCTION
from switchboard.standins.offline_server import OFFLINE_DEMO_MODEL, OFFLINE_MARKER, ScriptedResponse

from tests.utils.agent import ConversationHandle, deployment, llm_settings, unique_model
from tests.utils.handoff import make_agent, make_customer_conversation, reload
from tests.utils.rows import outbox_of


def tool_call(name: str, arguments: dict) -> ScriptedResponse:
    return ScriptedResponse(kind="tool_calls", tool_calls=[{"name": name, "arguments": arguments}])


async def _setup(make_tenant, sessions, offline_model, *responses, **extensions):  # type: ignore[no-untyped-def]
    state, url = offline_model
    model = unique_model()
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)), **extensions)
    customer, conversation = await make_customer_conversation(sessions, tenant, name="Ana")
    state.script(model).push(*responses)
    return tenant, ConversationHandle(tenant, customer, conversation), state.script(model)


async def test_escalation_assigns_the_less_loaded_agent_with_an_llm_summary(
    make_tenant, sessions, offline_model, orchestrator
):
    tenant, handle, script = await _setup(
        make_tenant,
        sessions,
        offline_model,
        tool_call("escalate_to_human", {"reason": "refund dispute"}),
        ScriptedResponse(content="Ana wants a refund for order 7; nothing promised yet."),
        ScriptedResponse(content="A colleague will take over now."),
    )
    await make_agent(sessions, tenant, "Busy", total=9)
    light = await make_agent(sessions, tenant, "Light", total=1)
    result = await orchestrator.handle_turn(handle.request("I want my money back"))
    assert result.reply == "A colleague will take over now."
    conversation = await reload(sessions, Conversation, handle.conversation.id)
    assert (conversation.status, conversation.assigned_agent_id) == ("human", light.id)
    [notice] = await outbox_of(sessions, tenant.id)
    assert notice.recipient == light.phone
    assert "Summary: Ana wants a refund for order 7; nothing promised yet." in notice.payload["text"]
    assert "Reason: refund dispute" in notice.payload["text"]
    summary_request = script.requests[1]
    assert summary_request["messages"][0]["content"] == HANDOFF_SUMMARY_INSTRUCTION
    assert "Customer: My order never arrived" in summary_request["messages"][1]["content"]


async def test_escalation_with_nobody_online_tells_the_model_to_announce_the_queue(
    make_tenant, sessions, offline_model, orchestrator
):
    tenant, handle, script = await _setup(
        make_tenant,
        sessions,
        offline_model,
        tool_call("escalate_to_human", {"reason": "angry"}),
        ScriptedResponse(content="Someone will answer soon."),
        handoff={"queue_reply": "Our team answers from 9:00 to 18:00."},
    )
    result = await orchestrator.handle_turn(handle.request("person please"))
    assert result.reply == "Someone will answer soon."
    tool_result = next(m for m in script.requests[1]["messages"] if m["role"] == "tool")
    assert "queued_for_human" in tool_result["content"]
    assert "Our team answers from 9:00 to 18:00." in tool_result["content"]
    conversation = await reload(sessions, Conversation, handle.conversation.id)
    assert conversation.status == "human" and conversation.queued_at is not None
    assert await outbox_of(sessions, tenant.id) == []
    async with sessions() as session:
        audit = (await session.exec(select(AuditLog).where(AuditLog.tenant_id == tenant.id))).one()
    assert audit.details["queued"] is True


async def test_the_offline_demo_model_passes_on_the_queue_reply_when_nobody_is_online(
    make_tenant, sessions, offline_model, orchestrator
):
    """`make run` without a provider: the demo model escalates a request for a person and, nobody being
    online, tells the customer the tenant's queue reply (not "a person will take over shortly")."""
    _, url = offline_model
    tenant = await make_tenant(
        llm=llm_settings(deployment(url, OFFLINE_DEMO_MODEL)),
        handoff={"queue_reply": "Our team answers from 9:00 to 18:00."},
    )
    customer, conversation = await make_customer_conversation(sessions, tenant, name="Ana")
    handle = ConversationHandle(tenant, customer, conversation)
    result = await orchestrator.handle_turn(handle.request("I want to talk to a person please"))
    assert result.reply == f"{OFFLINE_MARKER} Our team answers from 9:00 to 18:00."
    assert (await reload(sessions, Conversation, conversation.id)).status == "human"
