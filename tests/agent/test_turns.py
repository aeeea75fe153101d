"""Turn handling: built-in tools, history, idempotency, fallbacks, overflow, summaries (real HTTP model)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import pytest
from sqlmodel import col, select
from structlog.testing import capture_logs
from switchboard.agent import Orchestrator, TurnRejected
from switchboard.contracts import trace_id_for
from switchboard.conversations import Actor
from switchboard.db.models import AuditLog, Conversation, Customer, Message, ToolReceipt, Turn, utcnow
from switchboard.egress import EgressPolicy
from switchboard.handoff import escalate
from switchboard.llm.config import DeploymentSettings, LLMSettings
from switchboard.llm.trimming import count_tokens
from switchboard.standins.offline_server import OFFLINE_MARKER, SUMMARY_INSTRUCTION_MARKER, ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.agent import (
    conversation_messages,
    deployment,
    llm_settings,
    make_conversation,
    text,
    tool_calls,
    unique_model,
)


@pytest.fixture
def setup(make_tenant, sessions, offline_model):  # type: ignore[no-untyped-def]
    async def build(*responses: ScriptedResponse, deployments=None, **extensions):  # type: ignore[no-untyped-def]
        state, url = offline_model
        model = unique_model()
        deps = deployments or [deployment(url, model)]
        llm = {**llm_settings(*deps), **extensions.pop("llm", {})}
        tenant = await make_tenant(llm=llm, **extensions)
        conv = await make_conversation(sessions, tenant)
        state.script(model).push(*responses)
        return conv, state.script(model)

    return build


async def _conversation(sessions, conversation_id) -> Conversation:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return await session.get(Conversation, conversation_id)


async def _turn(sessions, inbound_id) -> Turn:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (await session.exec(select(Turn).where(Turn.inbound_message_id == inbound_id))).one()


# --- built-in tools -------------------------------------------------------------------------------


async def test_escalation_in_demo_mode_hands_over_and_tells_the_customer(setup, orchestrator, sessions):
    conv, script = await setup()  # nothing scripted: the demo model decides
    result = await orchestrator.handle_turn(conv.request("I want to talk to a real person"))
    assert result.reply.startswith(OFFLINE_MARKER) and "person" in result.reply
    assert [(r.name, r.outcome) for r in result.tool_calls] == [("escalate_to_human", "ok")]
    conversation = await _conversation(sessions, conv.conversation.id)
    assert (conversation.status, conversation.escalation_reason) == (
        "human",
        "The customer asked for a person.",
    )
    async with sessions() as session:
        audit = (await session.exec(select(AuditLog).where(AuditLog.tenant_id == conv.tenant.id))).all()
    assert [a.action for a in audit] == ["conversation.escalate"]
    assert audit[0].trace_id == result.trace_id


async def test_escalation_without_words_uses_the_handoff_reply(setup, orchestrator, sessions):
    conv, _ = await setup(tool_calls(("escalate_to_human", {"reason": "refund dispute"})), text(""))
    result = await orchestrator.handle_turn(conv.request("refund now"))
    assert result.reply == AgentSettings().handoff_reply
    assert (await _conversation(sessions, conv.conversation.id)).escalation_reason == "refund dispute"


async def test_end_conversation_without_farewell_is_silent_and_closes(setup, orchestrator, sessions):
    conv, script = await setup(tool_calls(("end_conversation", {"farewell": False, "reason": "thanks only"})))
    request = conv.request("thanks, bye")
    result = await orchestrator.handle_turn(request)
    assert (result.silent, result.reply) == (True, None)
    assert len(script.requests) == 1
    conversation = await _conversation(sessions, conv.conversation.id)
    assert conversation.status == "closed" and conversation.closed_at is not None
    assert (await _turn(sessions, request.inbound_message_id)).outcome == "silent"


async def test_end_conversation_with_farewell_says_goodbye(setup, orchestrator, sessions):
    conv, script = await setup(
        tool_calls(("end_conversation", {"farewell": True})), text("Bye, have a nice day!")
    )
    result = await orchestrator.handle_turn(conv.request("that's all"))
    assert result.reply == "Bye, have a nice day!"
    assert "tools" not in script.requests[1]  # after closing, only words
    assert (await _conversation(sessions, conv.conversation.id)).status == "closed"


async def test_save_customer_profile_validates_and_saves(setup, orchestrator, sessions):
    conv, script = await setup(
        tool_calls(("save_customer_profile", {"name": "Ana", "email": "not-an-email"})),
        tool_calls(
            ("save_customer_profile", {"name": "Ana", "email": "Ana@Example.com", "language": "pt-BR"})
        ),
        text("Saved, Ana."),
    )
    result = await orchestrator.handle_turn(conv.request("I'm Ana, ana@example.com, I speak Portuguese"))
    assert [(r.outcome, r.error_type) for r in result.tool_calls] == [
        ("error", "invalid_arguments"),
        ("ok", None),
    ]
    first_result = json.loads(script.requests[1]["messages"][-1]["content"])
    assert (
        first_result["error"]["type"] == "invalid_arguments" and "email" in first_result["error"]["message"]
    )
    async with sessions() as session:
        customer = await session.get(Customer, conv.customer.id)
    assert customer.profile == {"name": "Ana", "email": "ana@example.com", "language": "pt-BR"}


async def test_save_customer_profile_rejects_unknown_fields(setup, orchestrator, sessions):
    conv, script = await setup(
        tool_calls(("save_customer_profile", {"tenant_id": "other", "name": "X"})), text("ok")
    )
    result = await orchestrator.handle_turn(conv.request("hi"))
    assert result.tool_calls[0].error_type == "invalid_arguments"
    async with sessions() as session:
        assert (await session.get(Customer, conv.customer.id)).profile == {}


# --- history, persistence, idempotency --------------------------------------------------------------


async def test_history_is_loaded_in_order_without_the_inbound_row(setup, orchestrator, sessions):
    conv, script = await setup(text("answer"))
    inbound_id = uuid.uuid4()
    base = utcnow() - timedelta(minutes=5)
    async with sessions() as session, session.begin():
        for offset, (role, body) in enumerate(
            [("user", "first question"), ("assistant", "first answer"), ("human_agent", "a person said hi")]
        ):
            session.add(
                Message(
                    tenant_id=conv.tenant.id,
                    conversation_id=conv.conversation.id,
                    channel="whatsapp",
                    direction="inbound" if role == "user" else "outbound",
                    role=role,
                    text=body,
                    created_at=base + timedelta(seconds=offset),
                )
            )
        session.add(
            Message(
                id=inbound_id,
                tenant_id=conv.tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                direction="inbound",
                role="user",
                kind="audio",
                text=None,
                created_at=base + timedelta(seconds=10),
            )
        )
    result = await orchestrator.handle_turn(
        conv.request('[Audio transcription]: "where is my parcel"', inbound_id)
    )
    sent = script.requests[0]["messages"][1:]
    assert sent == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "assistant", "content": "(a person from the team wrote) a person said hi"},
        {"role": "user", "content": '[Audio transcription]: "where is my parcel"'},
    ]
    stored = await conversation_messages(sessions, conv.conversation.id)
    assert [(m.role, m.text) for m in stored][-1] == ("assistant", "answer")
    assert stored[-1].trace_id == result.trace_id == trace_id_for(conv.conversation.id, inbound_id)
    assert sum(1 for m in stored if m.id == inbound_id) == 1


async def test_missing_inbound_row_is_inserted_and_tool_messages_saved(setup, orchestrator, sessions):
    conv, _ = await setup(tool_calls(("save_customer_profile", {"name": "Bo"})), text("Thanks Bo"))
    request = conv.request("I'm Bo")
    result = await orchestrator.handle_turn(request)
    stored = await conversation_messages(sessions, conv.conversation.id)
    assert [(m.role, m.direction, m.kind) for m in stored] == [
        ("user", "inbound", "text"),
        ("assistant", "outbound", "tool_call"),
        ("tool", "outbound", "tool_result"),
        ("assistant", "outbound", "text"),
    ]
    assert stored[0].id == request.inbound_message_id and stored[0].text == "I'm Bo"
    assert stored[1].tool_calls[0]["id"] == stored[2].tool_call_id
    assert {m.trace_id for m in stored[1:]} == {result.trace_id}
    async with sessions() as session:
        receipts = (
            await session.exec(select(ToolReceipt).where(ToolReceipt.trace_id == result.trace_id))
        ).all()
    assert [(r.tool_name, r.outcome, len(r.args_hash), len(r.idempotency_key)) for r in receipts] == [
        ("save_customer_profile", "ok", 64, 64)
    ]


async def test_repeated_request_returns_the_stored_result_without_a_model_call(setup, orchestrator):
    conv, script = await setup(text("only once"))
    request = conv.request("hello")
    first = await orchestrator.handle_turn(request)
    second = await orchestrator.handle_turn(request)
    assert first == second and first.reply == "only once"
    assert len(script.requests) == 1


async def test_concurrent_duplicates_call_the_model_once(setup, orchestrator):
    conv, script = await setup(ScriptedResponse(content="one answer", latency_s=0.3))
    request = conv.request("hello")
    first, second = await asyncio.gather(orchestrator.handle_turn(request), orchestrator.handle_turn(request))
    assert first == second and first.reply == "one answer"
    assert len(script.requests) == 1


async def test_conversation_with_a_human_is_silent_without_a_model_call(setup, orchestrator, sessions):
    conv, script = await setup(text("never"))
    async with sessions() as session, session.begin():  # nobody online: it waits in the queue
        await escalate(
            session,
            tenant_id=conv.tenant.id,
            conversation_id=conv.conversation.id,
            reason="r",
            actor=Actor.ai(),
        )
    request = conv.request("hello?")
    result = await orchestrator.handle_turn(request)
    assert result.silent and script.requests == []
    row = await _turn(sessions, request.inbound_message_id)
    assert (row.outcome, row.error) == ("skipped", "conversation_status_human")


async def test_unknown_conversation_and_wrong_customer_are_rejected(setup, orchestrator):
    conv, _ = await setup()
    wrong_conversation = conv.request("x").model_copy(update={"conversation_id": uuid.uuid4()})
    with pytest.raises(TurnRejected) as missing:
        await orchestrator.handle_turn(wrong_conversation)
    assert missing.value.status_code == 404
    wrong_customer = conv.request("x").model_copy(update={"customer_id": uuid.uuid4()})
    with pytest.raises(TurnRejected) as mismatch:
        await orchestrator.handle_turn(wrong_customer)
    assert mismatch.value.status_code == 422


async def test_other_tenants_conversation_is_not_found(setup, make_tenant, orchestrator):
    conv, _ = await setup()
    other = await make_tenant()
    with pytest.raises(TurnRejected) as caught:
        await orchestrator.handle_turn(conv.request("x").model_copy(update={"tenant_id": other.id}))
    assert caught.value.status_code == 404


async def test_invalid_tenant_settings_fall_back_to_defaults_and_are_logged(setup, orchestrator):
    conv, _ = await setup(text("still answered"), loop={"max_tool_iterations": "many"})
    with capture_logs() as logs:
        result = await orchestrator.handle_turn(conv.request("hi"))
    assert result.reply == "still answered"
    assert any(e["event"] == "tenant_settings_invalid" and e["section"] == "loop" for e in logs)


# --- router paths inside a turn ------------------------------------------------------------------


async def test_fallback_is_recorded_on_the_turn(setup, orchestrator, offline_model, sessions):
    state, url = offline_model
    primary, backup = unique_model("primary"), unique_model("backup")
    state.script(primary).push(ScriptedResponse(kind="error", status=500))
    state.script(backup).push(text("backup answered"))
    conv, _ = await setup(
        deployments=[deployment(url, primary, priority=1), deployment(url, backup, priority=2)]
    )
    request = conv.request("hi")
    with capture_logs() as logs:
        result = await orchestrator.handle_turn(request)
    assert (result.reply, result.model, result.fallback_used) == ("backup answered", backup, True)
    row = await _turn(sessions, request.inbound_message_id)
    assert (row.model, row.fallback_used) == (backup, True)
    (event,) = [e for e in logs if e["event"] == "model_fallback"]
    assert event["answered_by"] == backup
    assert event["failed_deployments"][0]["deployment"] == primary
    assert "InternalServerError" in event["failed_deployments"][0]["error"]


async def test_all_models_failing_gives_the_waiting_reply_and_flags_the_turn(setup, orchestrator, sessions):
    conv, script = await setup(
        ScriptedResponse(kind="error", status=503), agent={"waiting_reply": "We'll be right back."}
    )
    request = conv.request("hi")
    result = await orchestrator.handle_turn(request)
    assert result.reply == "We'll be right back." and result.model is None
    assert result.flags == ["model_unavailable"]  # the worker keeps the question for the model
    row = await _turn(sessions, request.inbound_message_id)
    assert row.outcome == "degraded" and row.error.startswith("model_failed")


async def test_context_overflow_retry_drops_older_tool_history(setup, orchestrator, sessions):
    conv, script = await setup(
        tool_calls(("save_customer_profile", {"name": "Cy"})),
        text("saved"),
        ScriptedResponse(kind="overflow"),
        text("short answer"),
    )
    await orchestrator.handle_turn(conv.request("I'm Cy"))
    request = conv.request("what did you save?")
    result = await orchestrator.handle_turn(request)
    assert result.reply == "short answer"
    overflowed, retried = script.requests[2]["messages"], script.requests[3]["messages"]
    assert any(m["role"] == "tool" for m in overflowed)
    assert not any(m["role"] == "tool" or m.get("tool_calls") for m in retried)
    assert retried[-1] == {"role": "user", "content": "what did you save?"}
    assert (await _turn(sessions, request.inbound_message_id)).timings["overflow_retried"] is True


@pytest.mark.parametrize(
    "failure",
    [
        ScriptedResponse(kind="error", status=429, headers={"Retry-After": "47"}),
        ScriptedResponse(kind="empty", content="  "),
    ],
    ids=["429-retry-after-47", "empty-answer"],
)
async def test_failing_primary_is_answered_by_the_backup_and_the_backup_is_recorded(
    setup, orchestrator, offline_model, sessions, failure
):
    state, url = offline_model
    primary, backup = unique_model("primary"), unique_model("backup")
    state.script(primary).push(failure)
    state.script(backup).push(text("backup answered"))
    conv, _ = await setup(
        deployments=[deployment(url, primary, priority=1), deployment(url, backup, priority=2)],
        llm={"num_retries": 2},
    )
    request = conv.request("hi")
    result = await orchestrator.handle_turn(request)
    assert (result.reply, result.model, result.fallback_used) == ("backup answered", backup, True)
    row = await _turn(sessions, request.inbound_message_id)
    assert (row.outcome, row.model, row.fallback_used) == ("answered", backup, True)
    assert state.script(primary).received == 1  # no retry waited out the Retry-After


async def test_context_overflow_shrinks_to_the_limit_the_provider_states(setup, orchestrator, sessions):
    # the model table says 100k tokens; the provider's real window is 1,000 and its error says so
    conv, script = await setup(
        ScriptedResponse(kind="overflow", context_limit_tokens=1000),
        text("short answer"),
        llm={"default_context_window_tokens": 100_000},
    )
    base = utcnow() - timedelta(hours=1)
    async with sessions() as session, session.begin():
        for index in range(30):
            session.add(
                Message(
                    tenant_id=conv.tenant.id,
                    conversation_id=conv.conversation.id,
                    channel="whatsapp",
                    direction="inbound" if index % 2 == 0 else "outbound",
                    role="user" if index % 2 == 0 else "assistant",
                    text=f"message {index} " + "filler " * 40,
                    created_at=base + timedelta(seconds=index),
                )
            )
    request = conv.request("newest question")
    result = await orchestrator.handle_turn(request)
    assert result.reply == "short answer"
    overflowed, retried = script.requests[0]["messages"], script.requests[1]["messages"]
    count_model = "openai/" + script.requests[0]["model"]
    assert count_tokens(count_model, overflowed) > 1000
    assert count_tokens(count_model, retried, script.requests[1].get("tools")) <= int(
        1000 * LLMSettings().trim_ratio
    )
    assert retried[0] == overflowed[0]  # the system prompt, unchanged
    assert retried[-1] == {"role": "user", "content": "newest question"}
    assert retried[1:-1] == overflowed[len(overflowed) - len(retried) + 1 : -1]  # the newest older turns
    assert (await _turn(sessions, request.inbound_message_id)).timings["overflow_retried"] is True


async def test_history_is_trimmed_to_the_smallest_context_window(
    setup, orchestrator, sessions, offline_model
):
    state, url = offline_model
    tiny, roomy = unique_model("tiny"), unique_model("roomy")
    state.script(tiny).push(text("fits"))
    deployments = [
        deployment(url, tiny, max_input_tokens=1500),
        deployment(url, roomy, max_input_tokens=6000, priority=2),
    ]
    conv, _ = await setup(deployments=deployments)
    base = utcnow() - timedelta(hours=1)
    history = [
        {"role": "user" if index % 2 == 0 else "assistant", "content": f"message {index} " + "filler " * 30}
        for index in range(40)
    ]
    async with sessions() as session, session.begin():
        for index, message in enumerate(history):
            session.add(
                Message(
                    tenant_id=conv.tenant.id,
                    conversation_id=conv.conversation.id,
                    channel="whatsapp",
                    direction="inbound" if message["role"] == "user" else "outbound",
                    role=message["role"],
                    text=message["content"],
                    created_at=base + timedelta(seconds=index),
                )
            )
    await orchestrator.handle_turn(conv.request("newest question"))
    request = state.script(tiny).requests[0]
    sent, tools = request["messages"], request.get("tools")
    count_model = DeploymentSettings(**deployments[0]).litellm_model()
    budget = int(1500 * LLMSettings().trim_ratio)  # 80% of the smaller window: 1200 tokens
    system, question = sent[0], sent[-1]
    assert (system["role"], question) == ("system", {"role": "user", "content": "newest question"})
    kept = sent[1:-1]
    oldest = int(kept[0]["content"].split()[1])
    assert kept == history[oldest:]  # the newest messages, whole and in order
    assert count_tokens(count_model, sent, tools) <= budget
    # what trimming counts: the system prompt with the tools, plus each message on its own; the one
    # older message would not have fitted, so it stopped at the budget, not before it
    used = count_tokens(count_model, [system], tools) + sum(
        count_tokens(count_model, [message]) for message in [*kept, question]
    )
    assert used <= budget < used + count_tokens(count_model, [history[oldest - 1]])
    # the larger window alone would have kept everything: the smallest one decides
    assert count_tokens(count_model, [system, *history, question], tools) <= int(
        6000 * LLMSettings().trim_ratio
    )


async def _long_history(sessions, conv) -> list:  # type: ignore[no-untyped-def]
    base = utcnow() - timedelta(hours=1)
    ids = []
    async with sessions() as session, session.begin():
        for index in range(75):
            row = Message(
                tenant_id=conv.tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                direction="inbound" if index % 2 == 0 else "outbound",
                role="user" if index % 2 == 0 else "assistant",
                text=f"m{index}",
                created_at=base + timedelta(seconds=index),
            )
            ids.append(row.id)
            session.add(row)
    return ids


async def test_long_history_is_answered_first_then_summarized_once(setup, orchestrator, sessions):
    conv, script = await setup(text("answer 1"), text("The customer wants a refund."), text("answer 2"))
    ids = await _long_history(sessions, conv)
    request = conv.request("new question")
    result = await orchestrator.handle_turn(request)
    assert result.reply == "answer 1"
    answer_call, summary_call = script.requests[0]["messages"], script.requests[1]["messages"]
    # the answer never waits for the summary: it reads the whole history verbatim
    assert [m["content"] for m in answer_call[1:-1]] == [f"m{i}" for i in range(75)]
    assert summary_call[0]["content"].startswith(SUMMARY_INSTRUCTION_MARKER)
    # written after the turn: its question and answer are history too, all but the newest 50 are folded
    assert [m["content"] for m in summary_call[1:]] == [f"m{i}" for i in range(27)]
    row = await _turn(sessions, request.inbound_message_id)
    assert row.summary_through_message_id == ids[26]
    # the next turn reuses the summary: 50 messages after it is below the threshold, no new summary
    await orchestrator.handle_turn(conv.request("another"))
    assert len(script.requests) == 3
    assert "The customer wants a refund." in script.requests[2]["messages"][0]["content"]
    assert script.requests[2]["messages"][1]["content"] == "m27"


async def test_long_history_summary_is_a_background_job_after_the_reply(
    setup, sessions, gateway, arq_pool, settings
):
    from switchboard.queue import Queue

    from tests.utils.workers import run_worker_burst

    conv, script = await setup(text("answer 1"), text("The customer wants a refund."))
    ids = await _long_history(sessions, conv)
    orchestrator = Orchestrator(sessions=sessions, gateway=gateway, redis=arq_pool)
    request = conv.request("new question")
    assert (await orchestrator.handle_turn(request)).reply == "answer 1"
    assert len(script.requests) == 1  # the turn made one call: the answer
    row = await _turn(sessions, request.inbound_message_id)
    assert row.summary_through_message_id is None
    assert await arq_pool.exists(f"arq:job:history-summary:{row.id}")

    await run_worker_burst(settings, Queue.background)

    assert script.requests[1]["messages"][0]["content"].startswith(SUMMARY_INSTRUCTION_MARKER)
    row = await _turn(sessions, request.inbound_message_id)
    assert (row.summary_text, row.summary_through_message_id) == ("The customer wants a refund.", ids[26])


async def test_semaphore_bounds_concurrent_turns(make_tenant, sessions, settings, offline_model):
    from switchboard.crypto import CredentialCipher
    from switchboard.llm.router import ModelGateway

    state, url = offline_model
    model = unique_model("busy")
    state.script(model).latency_s = 0.2
    state.script(model).default = text("ok")
    gateway = ModelGateway(
        settings=settings,
        cipher=CredentialCipher(settings.secret("encryption_key").encode()),
        max_concurrent_calls=3,
    )
    orchestrator = Orchestrator(sessions=sessions, gateway=gateway)
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)))
    convs = [await make_conversation(sessions, tenant) for _ in range(8)]
    results = await asyncio.gather(*(orchestrator.handle_turn(c.request("hi")) for c in convs))
    assert [r.reply for r in results] == ["ok"] * 8
    assert state.script(model).max_in_flight == 3


async def test_other_tenants_messages_never_enter_the_history(setup, orchestrator, sessions):
    conv, script = await setup(text("fine"))
    other, _ = await setup()
    async with sessions() as session, session.begin():
        session.add(
            Message(
                tenant_id=other.tenant.id,
                conversation_id=other.conversation.id,
                channel="whatsapp",
                direction="inbound",
                role="user",
                text="secret of another tenant",
            )
        )
    await orchestrator.handle_turn(conv.request("hi"))
    assert "secret of another tenant" not in json.dumps(script.requests[0])
    async with sessions() as session:
        count = len(
            (
                await session.exec(
                    select(Message).where(col(Message.conversation_id) == conv.conversation.id)
                )
            ).all()
        )
    assert count == 2


async def test_unreadable_tenant_key_degrades_the_turn_with_a_log(
    setup, orchestrator, offline_model, sessions
):
    state, url = offline_model
    model = unique_model("locked")
    conv, _ = await setup(deployments=[deployment(url, model, api_key_encrypted="not-a-fernet-token")])
    request = conv.request("hi")
    with capture_logs() as logs:
        result = await orchestrator.handle_turn(request)
    assert result.reply == AgentSettings().error_reply
    assert state.script(model).requests == []
    assert any(e["event"] == "deployment_api_key_unreadable" and e["deployment"] == model for e in logs)
    row = await _turn(sessions, request.inbound_message_id)
    assert (row.outcome, row.error) == ("degraded", "deployment_api_key_unreadable")


async def test_empty_text_reaches_the_model_as_a_placeholder(setup, orchestrator):
    conv, script = await setup(text("Did you mean to send something?"))
    result = await orchestrator.handle_turn(conv.request("   "))
    assert result.reply == "Did you mean to send something?"
    assert script.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "[the customer sent a message without text]",
    }


async def test_a_turn_abandoned_by_a_crashed_process_is_taken_over(setup, orchestrator, sessions):
    conv, script = await setup(text("answered after takeover"), loop={"turn_timeout_s": 1})
    request = conv.request("hello")
    async with sessions() as session, session.begin():
        session.add(
            Turn(
                tenant_id=conv.tenant.id,
                conversation_id=conv.conversation.id,
                inbound_message_id=request.inbound_message_id,
                trace_id="x" * 32,
                status="running",
                updated_at=utcnow() - timedelta(minutes=5),
            )
        )
        session.add(
            Message(
                id=request.inbound_message_id,
                tenant_id=conv.tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                direction="inbound",
                role="user",
                text="hello",
            )
        )
    with capture_logs() as logs:
        result = await orchestrator.handle_turn(request)
    assert result.reply == "answered after takeover"
    assert any(e["event"] == "turn_taken_over" for e in logs)
    row = await _turn(sessions, request.inbound_message_id)
    assert row.status == "done" and row.result == result.model_dump(mode="json")


async def test_an_overflow_that_nothing_can_shrink_is_not_resent(setup, orchestrator, sessions):
    conv, script = await setup(
        ScriptedResponse(kind="overflow", context_limit_tokens=1000),
        agent={"error_reply": "Sorry, too long."},
    )
    request = conv.request("just this")
    result = await orchestrator.handle_turn(request)
    assert result.reply == "Sorry, too long." and len(script.requests) == 1
    assert (await _turn(sessions, request.inbound_message_id)).outcome == "degraded"


async def test_a_hanging_primary_leaves_the_backup_time_inside_the_turn_budget(
    setup, orchestrator, offline_model, sessions
):
    state, url = offline_model
    primary, backup = unique_model("hangs"), unique_model("backup")
    state.script(primary).push(ScriptedResponse(kind="hang"))
    state.script(backup).push(text("backup in time"))
    # the deployments' own timeout (45 s) is longer than the whole turn (8 s): without the reserve the
    # turn would time out waiting for the primary
    conv, _ = await setup(
        deployments=[deployment(url, primary, priority=1), deployment(url, backup, priority=2)],
        llm={"fallback_reserve_s": 5},
        loop={"turn_timeout_s": 8},
    )
    request = conv.request("hi")
    result = await orchestrator.handle_turn(request)
    assert (result.reply, result.model, result.fallback_used) == ("backup in time", backup, True)
    assert (await _turn(sessions, request.inbound_message_id)).outcome == "answered"


async def test_model_output_with_lone_surrogates_and_nul_is_stored_and_returned_clean(
    setup, orchestrator, sessions
):
    conv, _ = await setup(text("Listo \ud83d y\x00 gracias"))
    request = conv.request("hola")
    result = await orchestrator.handle_turn(request)
    assert result.reply == "Listo \ufffd y gracias"
    row = await _turn(sessions, request.inbound_message_id)
    assert row.status == "done" and row.result["reply"] == "Listo \ufffd y gracias"
    stored = [m for m in await conversation_messages(sessions, conv.conversation.id) if m.role == "assistant"]
    assert [m.text for m in stored] == ["Listo \ufffd y gracias"]


async def test_a_reply_with_nothing_printable_left_becomes_the_error_reply(setup, orchestrator):
    conv, _ = await setup(text("\x00\x00"))
    result = await orchestrator.handle_turn(conv.request("hola"))
    assert result.reply == AgentSettings().error_reply


async def test_a_turn_that_fails_in_process_is_released_at_once_for_the_retry(setup, orchestrator, sessions):
    conv, script = await setup(ScriptedResponse(content="too late", latency_s=5.0), text("answered on retry"))
    request = conv.request("hello")
    first = asyncio.create_task(orchestrator.handle_turn(request))
    await asyncio.sleep(0.5)  # the model call is under way: the caller gives up (a timeout, a disconnect)
    first.cancel()
    with capture_logs() as logs, pytest.raises(asyncio.CancelledError):
        await first
    assert [e["event"] for e in logs if e["event"].startswith("turn_")] == ["turn_failed_released"]
    async with sessions() as session:
        assert (
            await session.exec(select(Turn).where(Turn.inbound_message_id == request.inbound_message_id))
        ).all() == []
    retried = await asyncio.wait_for(orchestrator.handle_turn(request), timeout=10)  # no 150 s wait
    assert retried.reply == "answered on retry"


# --- the tenant's language -------------------------------------------------------------------------


async def test_a_spanish_tenant_gets_the_spanish_handoff_and_waiting_replies(setup, orchestrator):
    conv, _ = await setup(
        tool_calls(("escalate_to_human", {"reason": "refund dispute"})), text(""), locale={"language": "es"}
    )
    result = await orchestrator.handle_turn(conv.request("quiero un reembolso"))
    assert result.reply == "Gracias. Una persona de nuestro equipo continuará esta conversación en breve."

    conv, _ = await setup(ScriptedResponse(kind="error", status=503), locale={"language": "es"})
    result = await orchestrator.handle_turn(conv.request("hola"))
    assert result.reply == (
        "Lo siento, ahora no puedo responder. Le contestaré aquí en cuanto pueda; no hace falta que vuelva a "
        "escribir."
    )


async def test_a_text_the_tenant_wrote_wins_over_its_language(setup, orchestrator):
    conv, _ = await setup(
        ScriptedResponse(kind="error", status=503),
        locale={"language": "es"},
        agent={"waiting_reply": "Volvemos enseguida."},
    )
    assert (await orchestrator.handle_turn(conv.request("hola"))).reply == "Volvemos enseguida."


# --- events -----------------------------------------------------------------------------------


async def test_reply_writes_message_created_only_for_a_tenant_subscribed_to_it(
    setup, orchestrator, sessions, settings
):  # type: ignore[no-untyped-def]
    """The assistant's reply is one outbound ``message.created`` event, written only when an endpoint of
    the tenant takes that event (as inbound messages: switchboard.inbound.job)."""
    from switchboard.crypto import CredentialCipher
    from switchboard.db.models import EventOutbox
    from switchboard.events import forget_subscribers
    from switchboard.events.endpoints import create_endpoint

    conv, script = await setup(
        ScriptedResponse(content="First answer."),
        ScriptedResponse(content="Second answer."),
        ScriptedResponse(content="Third answer."),
    )
    tenant_id = conv.tenant.id

    async def created() -> list[EventOutbox]:
        async with sessions() as session:
            rows = await session.exec(
                select(EventOutbox).where(
                    EventOutbox.tenant_id == tenant_id, EventOutbox.event_type == "message.created"
                )
            )
            return list(rows.all())

    # no endpoint: the reply is stored, no event row
    first = await orchestrator.handle_turn(conv.request("Hello"))
    assert first.reply == "First answer."
    assert await created() == []

    # an endpoint for other events only: still none
    cipher = CredentialCipher(settings.secret("encryption_key").encode())
    async with sessions() as session, session.begin():
        await create_endpoint(
            session,
            tenant_id=tenant_id,
            url="http://127.0.0.1:9/leads",
            event_types=["lead.created"],
            description="crm",
            cipher=cipher,
            egress=EgressPolicy(allow_loopback=True),
        )
    forget_subscribers(tenant_id)
    second = await orchestrator.handle_turn(conv.request("Again"))
    assert second.reply == "Second answer."
    assert await created() == []

    # subscribed: exactly one outbound event carrying the stored reply
    async with sessions() as session, session.begin():
        await create_endpoint(
            session,
            tenant_id=tenant_id,
            url="http://127.0.0.1:9/messages",
            event_types=["message.created"],
            description="crm",
            cipher=cipher,
            egress=EgressPolicy(allow_loopback=True),
        )
    forget_subscribers(tenant_id)
    third = await orchestrator.handle_turn(conv.request("Once more"))
    assert third.reply == "Third answer."
    [event] = await created()
    async with sessions() as session:
        reply_row = (
            await session.exec(
                select(Message).where(
                    Message.conversation_id == conv.conversation.id, Message.text == "Third answer."
                )
            )
        ).one()
    assert event.payload["data"] == {
        "message_id": str(reply_row.id),
        "conversation_id": str(conv.conversation.id),
        "channel": "whatsapp",
        "direction": "outbound",
        "role": "assistant",
        "kind": "text",
        "text": "Third answer.",
    }


async def test_a_turn_claims_in_one_read_with_its_context_and_a_replay_is_one_statement(
    setup, orchestrator, sessions, engine
):  # type: ignore[no-untyped-def]
    """The claim reads the tenant, the conversation, the inbound id's turn, the inbound row and the
    context (summary, profile, memory, last closed conversation, lead) in one statement. With its inbound
    row stored (the chat worker's case) a text turn runs that read, the turn's INSERT and the history
    read, then the persist; the same request again is answered from the stored turn by that one read
    (the claim was four reads and the context a fifth before: 7 and 3 SELECTs)."""
    from sqlalchemy import event

    conv, _ = await setup(text("answer"))
    inbound_id = uuid.uuid4()
    async with sessions() as session, session.begin():
        session.add(
            Message(
                id=inbound_id,
                tenant_id=conv.tenant.id,
                conversation_id=conv.conversation.id,
                channel="whatsapp",
                direction="inbound",
                role="user",
                text="hello there",
            )
        )
    statements: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement.split(None, 1)[0].upper())

    request = conv.request("hello there", message_id=inbound_id)
    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        first = await orchestrator.handle_turn(request)
        turn_statements, statements[:] = list(statements), []
        again = await orchestrator.handle_turn(request)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)
    assert first.reply == "answer" and again == first
    # the claim: its read, the turn's INSERT, the history; the persist: the reply's INSERT (flushed by the
    # tenant's webhook-subscriber read, which a new tenant misses in the cache), the turn's UPDATE
    assert turn_statements == ["SELECT", "INSERT", "SELECT", "INSERT", "SELECT", "UPDATE"]
    assert statements == ["SELECT"]
