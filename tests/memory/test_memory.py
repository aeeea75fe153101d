"""Memory across conversations: written on close (job), merged and bounded, injected next time; returning flag.

What a poisoned memory or profile cannot do: tests/memory/test_memory_poisoning.py."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import select
from switchboard.db.engine import session_scope
from switchboard.db.models import Conversation, Message, UserMemory, utcnow
from switchboard.memory import (
    MEMORY_INSTRUCTION,
    close_idle_conversations,
    is_returning_customer,
    memory_sweep,
    summarize_into_memory,
    summarize_memory,
)
from switchboard.runtime.resources import Resources
from switchboard.standins.offline_server import ScriptedResponse

from tests.utils.agent import ConversationHandle, answer_with_script, deployment, llm_settings, unique_model
from tests.utils.handoff import make_customer_conversation, reload
from tests.utils.tenants import new_tenant


async def _tenant(make_tenant, offline_model, **extensions):  # type: ignore[no-untyped-def]
    state, url = offline_model
    model = unique_model()
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)), **extensions)
    return tenant, state.script(model)


async def _close(sessions, conversation, when=None):  # type: ignore[no-untyped-def]
    async with session_scope(sessions) as session:
        row = await session.get(Conversation, conversation.id)
        row.status, row.closed_at = "closed", when or utcnow()
        session.add(row)


async def _memory(sessions, tenant_id, customer_id):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (
            await session.exec(
                select(UserMemory).where(
                    UserMemory.tenant_id == tenant_id, UserMemory.customer_id == customer_id
                )
            )
        ).first()


async def test_memory_is_written_on_close_merged_and_bounded(
    make_tenant, sessions, offline_model, gateway, settings
):
    tenant, script = await _tenant(make_tenant, offline_model, memory={"max_chars": 200})
    customer, first = await make_customer_conversation(
        sessions, tenant, texts=("I ride a Trek Domane, size 56",)
    )
    await _close(sessions, first)
    script.push(ScriptedResponse(content="Rides a Trek Domane (size 56)."))
    ctx = {
        "resources": Resources(settings=settings, engine=None, sessions=sessions, redis=None),
        "model_gateway": gateway,
    }
    assert await summarize_memory(ctx, str(tenant.id), str(first.id)) == "updated"
    assert await summarize_memory(ctx, str(tenant.id), str(first.id)) == "unchanged"  # once per conversation
    assert (await _memory(sessions, tenant.id, customer.id)).summary == "Rides a Trek Domane (size 56)."
    assert len(script.requests) == 1
    prompt = script.requests[0]["messages"]
    assert prompt[0]["content"] == MEMORY_INSTRUCTION.format(max_chars=200)
    assert "Existing notes:\n(none)" in prompt[1]["content"]
    assert "Customer: I ride a Trek Domane, size 56" in prompt[1]["content"]

    async with session_scope(sessions) as session:
        second = Conversation(tenant_id=tenant.id, customer_id=customer.id, channel="whatsapp")
        session.add(second)
        await session.flush()
        session.add(
            Message(
                tenant_id=tenant.id,
                conversation_id=second.id,
                channel="whatsapp",
                direction="inbound",
                role="user",
                text="My brakes squeak",
            )
        )
    await _close(sessions, second)
    script.push(ScriptedResponse(content="x" * 500))
    text = await summarize_into_memory(
        sessions, gateway, tenant_id=tenant.id, conversation_id=second.id, trace_id="t"
    )
    assert text is None  # over memory.max_chars: rejected, not cut (a cut sentence can lose its qualifier)
    assert "Existing notes:\nRides a Trek Domane (size 56)." in script.requests[1]["messages"][1]["content"]
    assert (await _memory(sessions, tenant.id, customer.id)).summary == "Rides a Trek Domane (size 56)."
    assert (await reload(sessions, Conversation, second.id)).memory_summarized_at is not None


async def test_open_conversation_and_model_failure_write_nothing(
    make_tenant, sessions, offline_model, gateway
):
    tenant, script = await _tenant(make_tenant, offline_model)
    customer, conversation = await make_customer_conversation(sessions, tenant)
    assert (
        await summarize_into_memory(
            sessions, gateway, tenant_id=tenant.id, conversation_id=conversation.id, trace_id="t"
        )
        is None
    )
    await _close(sessions, conversation)
    script.push(ScriptedResponse(kind="error", status=500))
    assert (
        await summarize_into_memory(
            sessions, gateway, tenant_id=tenant.id, conversation_id=conversation.id, trace_id="t"
        )
        is None
    )
    assert await _memory(sessions, tenant.id, customer.id) is None
    assert (await reload(sessions, Conversation, conversation.id)).memory_summarized_at is None


async def test_idle_conversations_close_and_the_sweep_summarizes_them(
    scratch_database, offline_model, gateway, settings
):
    # both jobs scan every tenant: on a database of this test's own they see exactly its conversations
    sessions = scratch_database.sessions
    tenant = await new_tenant(sessions, memory={"inactivity_close_s": 60})
    script = await answer_with_script(sessions, tenant.id, offline_model)
    customer, idle = await make_customer_conversation(sessions, tenant, texts=("Need a new chain",))
    _, fresh = await make_customer_conversation(sessions, tenant)
    async with session_scope(sessions) as session:
        for message in (await session.exec(select(Message).where(Message.conversation_id == idle.id))).all():
            message.created_at = utcnow() - timedelta(minutes=5)
            session.add(message)
    assert await close_idle_conversations(sessions, now=utcnow()) == [idle.id]
    assert (await reload(sessions, Conversation, idle.id)).status == "closed"
    assert (await reload(sessions, Conversation, fresh.id)).status == "ai"
    script.push(ScriptedResponse(content="Wants a new chain."))
    ctx = {
        "resources": Resources(settings=settings, engine=None, sessions=sessions, redis=None),
        "model_gateway": gateway,
    }
    assert await memory_sweep(ctx) == {"closed": 0, "summarized": 1}
    assert (await _memory(sessions, tenant.id, customer.id)).summary == "Wants a new chain."
    assert await memory_sweep(ctx) == {"closed": 0, "summarized": 0}  # summarized once


async def test_returning_customer_comes_from_the_database(make_tenant, sessions):
    tenant = await make_tenant()
    customer, old = await make_customer_conversation(sessions, tenant)
    _, other_customers = await make_customer_conversation(sessions, tenant)
    now = utcnow()

    async def returning(window_days=90, exclude=None):  # type: ignore[no-untyped-def]
        async with sessions() as session:
            return await is_returning_customer(
                session,
                tenant_id=tenant.id,
                customer_id=customer.id,
                window_days=window_days,
                now=now,
                exclude_conversation_id=exclude,
            )

    assert await returning() is False  # open conversation only
    await _close(sessions, old, now - timedelta(days=30))
    assert await returning() is True
    assert await returning(window_days=7) is False
    assert await returning(exclude=old.id) is False
    await _close(sessions, other_customers)
    assert await returning(window_days=7) is False


async def test_next_conversation_prompt_carries_memory_and_returning_flag(
    make_tenant, sessions, offline_model, orchestrator
):
    tenant, script = await _tenant(make_tenant, offline_model)
    customer, old = await make_customer_conversation(sessions, tenant)
    await _close(sessions, old)
    async with session_scope(sessions) as session:
        session.add(UserMemory(tenant_id=tenant.id, customer_id=customer.id, summary="Prefers Portuguese."))
        new = Conversation(tenant_id=tenant.id, customer_id=customer.id, channel="whatsapp")
        session.add(new)
    script.push(ScriptedResponse(content="Olá!"))
    result = await orchestrator.handle_turn(ConversationHandle(tenant, customer, new).request("hi"))
    assert result.reply == "Olá!"
    system = script.requests[0]["messages"][0]["content"]
    assert "<user_history>\nPrefers Portuguese.\n</user_history>" in system
    assert "never mention a profile, a memory" in system
    assert "Returning customer: yes (an earlier conversation ended within the last 90 days)." in system


async def test_first_conversation_prompt_says_not_returning(
    make_tenant, sessions, offline_model, orchestrator
):
    tenant, script = await _tenant(make_tenant, offline_model, memory={"returning_customer_window_days": 30})
    customer, conversation = await make_customer_conversation(sessions, tenant)
    script.push(ScriptedResponse(content="Hello"))
    await orchestrator.handle_turn(ConversationHandle(tenant, customer, conversation).request("hi"))
    system = script.requests[0]["messages"][0]["content"]
    assert "Returning customer: no (no earlier conversation in the last 30 days)." in system
    assert "<user_history>" not in system
