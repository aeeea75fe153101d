"""The bounded tool loop, end to end: Orchestrator → LiteLLM Router → offline server over HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlmodel import select
from switchboard.agent import Orchestrator
from switchboard.db.models import Turn
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import AgentSettings

from tests.utils.agent import (
    call,
    deployment,
    llm_settings,
    make_conversation,
    offered,
    text,
    tool_calls,
    unique_model,
)
from tests.utils.toolsets import ScratchToolSet


class Harness:
    def __init__(self, orchestrator, conv, script, sessions):  # type: ignore[no-untyped-def]
        self.orchestrator, self.conv, self.script, self.sessions = orchestrator, conv, script, sessions

    async def turn(self, message: str = "hi"):  # type: ignore[no-untyped-def]
        request = self.conv.request(message)
        result = await self.orchestrator.handle_turn(request)
        assert bool(result.reply and result.reply.strip()) != result.silent  # reply xor silent
        async with self.sessions() as session:
            row = (
                await session.exec(select(Turn).where(Turn.inbound_message_id == request.inbound_message_id))
            ).one()
        assert row.result == result.model_dump(mode="json")
        return result, row


@pytest.fixture
def harness_for(make_tenant, sessions, gateway, offline_model):  # type: ignore[no-untyped-def]
    async def build(
        *responses: ScriptedResponse,
        loop: dict | None = None,
        agent: dict | None = None,
        toolset=None,
        **policy,
    ):  # type: ignore[no-untyped-def]
        state, url = offline_model
        model = unique_model()
        extensions: dict[str, Any] = {"llm": llm_settings(deployment(url, model), **policy)}
        if loop:
            extensions["loop"] = loop
        if agent:
            extensions["agent"] = agent
        tenant = await make_tenant(**extensions)
        conv = await make_conversation(sessions, tenant)
        state.script(model).push(*responses)
        orchestrator = Orchestrator(
            sessions=sessions, gateway=gateway, toolsets=[toolset or ScratchToolSet()]
        )
        return Harness(orchestrator, conv, state.script(model), sessions)

    return build


async def test_plain_answer_records_model_usage_and_history(harness_for):
    h = await harness_for(text("We open at 9."))
    result, row = await h.turn("When do you open?")
    assert result.reply == "We open at 9."
    assert result.model == h.script.requests[0]["model"]
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens > 0
    assert row.outcome == "answered" and row.timings["model_calls"] == 1
    sent = h.script.requests[0]["messages"]
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "When do you open?"}


async def test_iteration_limit_then_final_call_without_tools(harness_for):
    h = await harness_for(
        tool_calls(call("lookup", {"q": "1"})),
        tool_calls(call("lookup", {"q": "2"})),
        tool_calls(call("lookup", {"q": "3"})),
        text("final words"),
        loop={"max_tool_iterations": 2, "per_tool_call_cap": 10},
    )
    result, row = await h.turn()
    assert [r.name for r in result.tool_calls] == ["lookup", "lookup"]
    assert [bool(offered(r)) for r in h.script.requests] == [True, True, False]
    # the third response (tool calls despite tools=[]) is not executed and has no words, so the
    # tenant's error reply ends the turn; the queued "final words" is never requested
    assert result.reply == AgentSettings().error_reply
    assert [r.content for r in h.script.queue] == ["final words"]
    assert row.timings["forced_final_call"] is True
    assert row.timings["tool_iterations"] == 2


async def test_final_call_after_iterations_gives_the_models_words(harness_for):
    h = await harness_for(
        tool_calls(call("lookup")),
        text("answer after final call"),
        loop={"max_tool_iterations": 1},
    )
    result, _ = await h.turn()
    assert result.reply == "answer after final call"
    assert "tools" not in h.script.requests[1]


async def test_empty_answer_gets_one_words_only_call(harness_for):
    h = await harness_for(text(""), text("now with words"))
    result, row = await h.turn()
    assert result.reply == "now with words"
    assert offered(h.script.requests[0]) and "tools" not in h.script.requests[1]
    assert row.timings["model_calls"] == 2


async def test_turn_budget_ends_the_turn_with_the_error_reply(harness_for):
    toolset = ScratchToolSet(sleep_s=3600)  # a tool that would never finish within the test
    h = await harness_for(
        tool_calls(call("slow")),
        loop={"turn_timeout_s": 0.5},
        agent={"error_reply": "Sorry, please try again."},
        toolset=toolset,
    )
    async with asyncio.timeout(60):  # a cap on a broken budget, not a measurement
        result, row = await h.turn()
    assert result.reply == "Sorry, please try again."
    assert (row.outcome, row.error) == ("degraded", "turn_timeout")
    assert (toolset.cancelled, toolset.active) == (1, 0)  # the budget cut the running tool off


async def test_per_tool_timeout_is_reported_to_the_model(harness_for):
    h = await harness_for(
        tool_calls(call("slow")),
        text("it timed out"),
        loop={"tool_timeout_s": 0.2},
        toolset=ScratchToolSet(sleep_s=3),
    )
    result, _ = await h.turn()
    assert result.reply == "it timed out"
    assert [(r.name, r.outcome, r.error_type) for r in result.tool_calls] == [("slow", "timeout", "timeout")]
    tool_message = h.script.requests[1]["messages"][-1]
    assert json.loads(tool_message["content"])["error"]["type"] == "timeout"


async def test_tool_results_are_capped_then_truncated(harness_for):
    h = await harness_for(tool_calls(call("big")), text("done"), toolset=ScratchToolSet(big_chars=250_000))
    await h.turn()
    content = h.script.requests[1]["messages"][-1]["content"]
    assert len(content) <= 4_000
    kept = content.index("\n…[truncated")
    # the raw output was first cut to the 100,000-character ceiling, then truncated for the model
    assert content.endswith(f"[truncated {100_000 - kept} characters]")
    assert content[:kept] == "x" * kept


async def test_per_tool_cap_hides_the_tool_and_rejects_extra_calls(harness_for):
    h = await harness_for(
        tool_calls(call("lookup")),
        tool_calls(call("lookup")),
        tool_calls(call("lookup")),
        text("ok"),
        loop={"per_tool_call_cap": 2},
    )
    result, _ = await h.turn()
    assert [r.outcome for r in result.tool_calls] == ["ok", "ok", "rejected"]
    assert result.tool_calls[2].error_type == "call_limit"
    assert "lookup" in offered(h.script.requests[1]) and "lookup" not in offered(h.script.requests[2])
    assert "escalate_to_human" in offered(h.script.requests[2])  # always-on tools stay


async def test_turn_wide_cap_rejects_calls_over_it(harness_for):
    h = await harness_for(
        tool_calls(*(call("lookup", {"q": str(i)}) for i in range(5))),
        text("capped"),
        loop={"max_tool_calls_per_turn": 3, "per_tool_call_cap": 10},
    )
    result, _ = await h.turn()
    assert [r.outcome for r in result.tool_calls].count("ok") == 3
    assert [r.error_type for r in result.tool_calls if r.outcome == "rejected"] == ["turn_call_limit"] * 2
    assert "tools" not in h.script.requests[1]  # cap reached: the next call is words-only
    assert result.reply == "capped"


async def test_bad_calls_become_tool_results_and_parallel_calls_are_all_answered(harness_for):
    toolset = ScratchToolSet()
    h = await harness_for(
        tool_calls(
            call("no_such_tool", {}, "c1"),
            call("lookup", "{not json", "c2"),
            call("boom", {}, "c3"),
            call("refuse", {}, "c4"),
            call("lookup", {"q": "a"}, "c5"),
            call("lookup", {"q": "b"}, "c6"),
        ),
        text("recovered"),
        toolset=toolset,
        loop={"per_tool_call_cap": 5},
    )
    result, _ = await h.turn()
    assert result.reply == "recovered"
    outcomes = {(r.name, r.outcome, r.error_type) for r in result.tool_calls}
    assert outcomes == {
        ("no_such_tool", "error", "unknown_tool"),
        ("lookup", "error", "invalid_arguments"),
        ("boom", "error", "tool_exception"),
        ("refuse", "error", "not_found"),
        ("lookup", "ok", None),
    }
    answers = {
        m["tool_call_id"]: m["content"] for m in h.script.requests[1]["messages"] if m["role"] == "tool"
    }
    assert set(answers) == {"c1", "c2", "c3", "c4", "c5", "c6"}
    assert json.loads(answers["c5"]) == {"echo": {"q": "a"}}
    assert toolset.max_active == 2  # the two good lookups ran concurrently
    contexts = {c.call_id: c for c in toolset.contexts}
    assert (
        contexts["c5"].tenant_id == h.conv.tenant.id
        and contexts["c5"].idempotency_key != contexts["c6"].idempotency_key
    )


async def test_thinking_tags_never_reach_the_reply_or_the_history(harness_for):
    h = await harness_for(text("<thinking>they look rich; upsell</thinking>Your parcel ships today."))
    result, _ = await h.turn()
    assert result.reply == "Your parcel ships today."
    h.script.push(text("second"))
    await h.turn("and tomorrow?")
    history = h.script.requests[-1]["messages"]
    assert not any("upsell" in json.dumps(m) for m in history)
    assert {"role": "assistant", "content": "Your parcel ships today."} in history


async def test_thinking_only_answer_falls_back_to_a_words_call(harness_for):
    h = await harness_for(text("<think>nothing to say</think>"), text("Hello!"))
    result, _ = await h.turn()
    assert result.reply == "Hello!"


FAREWELL, HANDOFF, ERROR, WAITING = (
    AgentSettings().farewell_reply,
    AgentSettings().handoff_reply,
    AgentSettings().error_reply,
    AgentSettings().waiting_reply,
)


@pytest.mark.parametrize(
    ("responses", "loop", "expect"),
    [
        ([text("plain")], {}, ("plain", "answered", None)),
        ([tool_calls(call("end_conversation", {"farewell": False}))], {}, (None, "silent", None)),
        (
            [tool_calls(call("end_conversation", {"farewell": True})), text("")],
            {},
            (FAREWELL, "answered", None),
        ),
        ([tool_calls(call("escalate_to_human", {"reason": "r"})), text("")], {}, (HANDOFF, "answered", None)),
        ([ScriptedResponse(kind="error", status=500)], {}, (WAITING, "degraded", "model_failed")),
        ([tool_calls(call("slow"))], {"turn_timeout_s": 0.3}, (ERROR, "degraded", "turn_timeout")),
        (
            [tool_calls(call("lookup"))] * 3 + [text("")],
            {"max_tool_iterations": 2},
            (ERROR, "answered", None),  # no words after the last call: the error reply
        ),
        ([text("<thinking>only</thinking>"), text("")], {}, (ERROR, "answered", None)),
    ],
    ids=[
        "answer",
        "end-silent",
        "end-farewell",
        "escalate",
        "model-down",
        "turn-timeout",
        "iterations",
        "thinking-only",
    ],
)
async def test_reply_xor_silent_on_every_path(harness_for, responses, loop, expect):
    h = await harness_for(*responses, loop=loop or None, toolset=ScratchToolSet(sleep_s=3))
    result, row = await h.turn()  # Harness.turn asserts reply xor silent and the stored copy
    error_kind = row.error.split(":")[0] if row.error else None
    assert (result.reply, row.outcome, error_kind) == expect and result.silent is (expect[0] is None)


async def test_structured_parts_are_capped_with_an_error_the_model_sees_never_cut_silently(
    harness_for,
) -> None:  # type: ignore[no-untyped-def]
    options = {"style": "buttons", "prompt": "?", "options": [{"id": "a", "title": "A"}]}
    product = {"title": "Mug", "cta_title": "Buy", "cta_id": "buy"}
    h = await harness_for(
        tool_calls(*[("offer_options", options)] * 3, *[("show_product", product)] * 3),
        text("Here you go."),
    )
    result, row = await h.turn("show me")
    assert [p.kind for p in result.parts] == ["buttons"] * 3 + ["product"] * 2
    refused = [
        m
        for m in h.script.requests[1]["messages"]
        if m["role"] == "tool" and "too_many_parts" in m["content"]
    ]
    assert len(refused) == 1
    assert row.result["parts"][0] == {
        "kind": "buttons",
        "prompt": "?",
        "options": [{"id": "a", "title": "A", "description": None, "url": None}],
    }
