"""Per-turn cost (LiteLLM's offline cost map) and the monthly budget's warning and actions."""

from __future__ import annotations

import pytest
from sqlmodel import select
from structlog.testing import capture_logs
from switchboard.db.models import Conversation, Turn
from switchboard.llm import import_litellm

from tests.utils.agent import deployment, llm_settings, make_conversation, text, unique_model


def _priced(url: str) -> dict:  # type: ignore[type-arg]
    # an OpenAI model LiteLLM's cost map prices, served by the offline server (it answers any model name)
    return {"id": unique_model("gpt4o"), "provider": "openai", "model": "gpt-4o", "api_base": url + "/v1"}


async def _turn(sessions, inbound_id) -> Turn:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (await session.exec(select(Turn).where(Turn.inbound_message_id == inbound_id))).one()


@pytest.fixture
def budget_tenant(make_tenant, sessions, offline_model):  # type: ignore[no-untyped-def]
    async def build(budget: dict | None = None):  # type: ignore[no-untyped-def,type-arg]
        state, url = offline_model
        cheap = unique_model("cheap")
        extensions = {"budget": budget} if budget else {}
        tenant = await make_tenant(
            llm=llm_settings(_priced(url), deployment(url, cheap, priority=2)), **extensions
        )
        return await make_conversation(sessions, tenant), state.script("gpt-4o"), state.script(cheap), cheap

    return build


async def test_a_turn_records_its_cost_from_the_cost_map(budget_tenant, orchestrator, sessions):
    conv, big, _, _ = await budget_tenant()
    big.push(text("Hello!", prompt_tokens=1000, completion_tokens=100))
    request = conv.request("hi")
    result = await orchestrator.handle_turn(request)
    prompt_usd, completion_usd = import_litellm().cost_per_token(
        model="openai/gpt-4o", prompt_tokens=1000, completion_tokens=100
    )
    turn = await _turn(sessions, request.inbound_message_id)
    assert turn.cost_usd == pytest.approx(prompt_usd + completion_usd) and turn.cost_usd > 0
    assert result.usage.cost_usd == pytest.approx(turn.cost_usd)
    assert turn.usage["cost_usd"] == pytest.approx(turn.cost_usd)
    assert turn.timings["unpriced_calls"] == 0


async def test_the_offline_model_is_unpriced_and_costs_nothing(
    make_tenant, sessions, offline_model, orchestrator
):
    state, url = offline_model
    model = unique_model()
    tenant = await make_tenant(llm=llm_settings(deployment(url, model)))
    conv = await make_conversation(sessions, tenant)
    state.script(model).push(text("ok"))
    request = conv.request("hi")
    await orchestrator.handle_turn(request)
    turn = await _turn(sessions, request.inbound_message_id)
    assert (turn.cost_usd, turn.timings["unpriced_calls"]) == (0.0, 1)


async def test_past_the_budget_the_cheapest_group_answers(budget_tenant, orchestrator, sessions):
    conv, big, cheap, cheap_id = await budget_tenant({"monthly_usd": 0.001, "action": "cheaper_group"})
    big.push(text("Expensive hello", prompt_tokens=1000, completion_tokens=100))  # 0.0035 USD: over budget
    first = await orchestrator.handle_turn(conv.request("hi"))
    assert first.model != cheap_id and first.flags == []
    cheap.push(text("Cheap hello"))
    with capture_logs() as logs:
        second = await orchestrator.handle_turn(conv.request("hi again"))
    assert (second.reply, second.model, second.flags) == ("Cheap hello", cheap_id, ["budget_exceeded"])
    exceeded = [e for e in logs if e["event"] == "budget_exceeded"]
    assert exceeded and exceeded[0]["action"] == "cheaper_group" and exceeded[0]["budget_usd"] == 0.001


async def test_past_the_budget_with_handoff_no_model_is_called(budget_tenant, orchestrator, sessions):
    holding = "We are busy; a person will answer you here."
    conv, big, cheap, _ = await budget_tenant(
        {"monthly_usd": 0.001, "action": "handoff", "holding_reply": holding}
    )
    big.push(text("Expensive hello", prompt_tokens=1000, completion_tokens=100))
    await orchestrator.handle_turn(conv.request("hi"))
    received = (big.received, cheap.received)
    request = conv.request("hello?")
    result = await orchestrator.handle_turn(request)
    assert (result.reply, result.flags) == (holding, ["budget_exceeded"])
    assert (big.received, cheap.received) == received
    async with sessions() as session:
        conversation = await session.get(Conversation, conv.conversation.id)
    assert (conversation.status, conversation.escalation_reason) == ("human", "monthly model budget exceeded")
    turn = await _turn(sessions, request.inbound_message_id)
    assert (turn.outcome, turn.error, turn.cost_usd) == ("blocked", "budget_exceeded", 0.0)


async def test_past_the_warning_ratio_the_turn_is_flagged(budget_tenant, orchestrator):
    conv, big, _, _ = await budget_tenant({"monthly_usd": 0.004, "warn_ratio": 0.5})
    big.push(
        text("one", prompt_tokens=1000, completion_tokens=100),  # 0.0035 USD: past half of 0.004
        text("two"),
    )
    assert (await orchestrator.handle_turn(conv.request("a"))).flags == []
    with capture_logs() as logs:
        second = await orchestrator.handle_turn(conv.request("b"))
    assert second.flags == ["budget_warning"] and second.reply == "two"
    warning = next(e for e in logs if e["event"] == "budget_warning")
    assert warning["spent_usd"] == pytest.approx(0.0035) and warning["budget_usd"] == 0.004
