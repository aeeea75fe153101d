"""Trimming to the context window, tool-pair integrity, reasoning-tag removal."""

from __future__ import annotations

import pytest
from switchboard.llm.trimming import (
    count_tokens,
    repair_tool_pairs,
    split_units,
    strip_reasoning,
    strip_tool_history,
    trim_to_budget,
)

MODEL = "openai/unknown-test-model"


def _pair(call_id: str, result: str) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def _history(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are the agent. " * 5}]
    for index in range(turns):
        messages.append({"role": "user", "content": f"question {index} " + "words " * 40})
        messages.extend(_pair(f"call{index}", f"result {index} " + "data " * 40))
        messages.append({"role": "assistant", "content": f"answer {index} " + "text " * 40})
    return messages


@pytest.mark.parametrize(
    ("raw", "visible"),
    [
        ("<thinking>plan: upsell</thinking>Hello! How can I help?", "Hello! How can I help?"),
        ("Sure.<think>\ninternal\n</think> Your order ships today.", "Sure. Your order ships today."),
        ("<reasoning a='1'>x</reasoning>Hi<THINKING>y</THINKING>!", "Hi!"),
        ("Answer first. <thinking>unfinished thought that never closes", "Answer first."),
        ("stray </thinking>close", "stray close"),
        ("<thinking>only thoughts</thinking>", ""),
    ],
)
def test_strip_reasoning_removes_reasoning_blocks(raw, visible):
    assert strip_reasoning(raw) == visible


def test_trim_keeps_system_prompt_newest_turns_and_tool_pairs():
    messages = _history(8)
    messages.append({"role": "user", "content": "the newest question"})
    budget = count_tokens(MODEL, messages) // 3
    trimmed = trim_to_budget(messages, model=MODEL, budget_tokens=budget)
    assert trimmed[0] == messages[0]
    assert trimmed[-1] == {"role": "user", "content": "the newest question"}
    assert count_tokens(MODEL, trimmed) <= budget
    assert len(trimmed) < len(messages)
    # what is kept is a contiguous suffix of units: the newest turns
    kept = trimmed[1:]
    assert kept == messages[len(messages) - len(kept) :]
    # no tool result without its call and no call without its result
    for index, message in enumerate(kept):
        if message["role"] == "tool":
            assert kept[index - 1]["tool_calls"][0]["id"] == message["tool_call_id"]
        if message.get("tool_calls"):
            assert kept[index + 1]["tool_call_id"] == message["tool_calls"][0]["id"]


def test_trim_never_drops_the_current_turn_even_over_budget():
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "old"},
        {"role": "user", "content": "new " * 500},
    ]
    trimmed = trim_to_budget(messages, model=MODEL, budget_tokens=50)
    assert trimmed == [messages[0], messages[2]]


def test_trim_returns_everything_when_it_fits():
    messages = _history(2)
    assert trim_to_budget(messages, model=MODEL, budget_tokens=100_000) == messages


def test_split_units_keeps_a_call_with_all_its_results():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "y", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    head, units = split_units(messages)
    assert head == messages[:1]
    assert [len(unit) for unit in units] == [1, 3, 1]


def test_strip_tool_history_keeps_the_current_exchange():
    messages = _history(2) + [{"role": "user", "content": "now"}, *_pair("current", "fresh")]
    stripped = strip_tool_history(messages)
    assert [m["role"] for m in stripped] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert stripped[-1] == {"role": "tool", "tool_call_id": "current", "content": "fresh"}


def test_repair_tool_pairs_drops_orphans():
    messages = [
        {"role": "user", "content": "q"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
        {
            "role": "assistant",
            "content": "partial",
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": "n", "arguments": "{}"}}],
        },
        {"role": "user", "content": "q2"},
        *_pair("ok", "fine"),
    ]
    assert repair_tool_pairs(messages) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "partial"},
        {"role": "user", "content": "q2"},
        *_pair("ok", "fine"),
    ]


# --- context-overflow recovery ------------------------------------------------------------------

from switchboard.llm.trimming import shrink_to_budget, stated_context_limit  # noqa: E402
from switchboard.standins.offline_server import overflow_message  # noqa: E402


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (overflow_message(8192, 9000), 8192),
        ("prompt is too long: 210000 tokens > 200000 maximum", 200_000),
        ("This model's maximum context length is 128,000 tokens.", 128_000),
        ("Requested tokens exceed context window of 4096", 4096),
        ("input length (9000) exceeds the model's context length (8192)", 8192),
        ("the input is longer than the model's context length", None),
        ("maximum context length is 12 tokens", None),  # not a context window
    ],
)
def test_the_limit_stated_in_a_provider_error_is_parsed(text, limit):
    assert stated_context_limit(text) == limit


MODEL = "gpt-4o-mini"


def _exchange(call_id: str, result: str) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def _conversation(result_chars: int) -> list[dict]:
    older = []
    for index in range(10):
        older += [
            {"role": "user", "content": f"old question {index} " + "words " * 40},
            {"role": "assistant", "content": f"old answer {index} " + "words " * 40},
        ]
    return [
        {"role": "system", "content": "You are the shop's assistant."},
        *older,
        {"role": "user", "content": "where is my order?"},
        *_exchange("c1", "first result " + "x " * 50),
        *_exchange("c2", "order data " + "y " * result_chars),
    ]


def test_shrink_drops_older_turns_first_and_keeps_the_current_tool_result_whole():
    messages = _conversation(result_chars=50)
    budget = count_tokens(MODEL, messages) - 100
    shrunk = shrink_to_budget(messages, model=MODEL, budget_tokens=budget)
    assert count_tokens(MODEL, shrunk) <= budget
    assert shrunk[0] == messages[0] and shrunk[-5:] == messages[-5:]  # current turn untouched
    assert len(shrunk) < len(messages)


def test_shrink_then_shortens_the_current_tool_result_keeping_system_and_question():
    messages = _conversation(result_chars=6000)
    budget = 1200
    shrunk = shrink_to_budget(messages, model=MODEL, budget_tokens=budget)
    assert count_tokens(MODEL, shrunk) <= budget
    assert shrunk[0] == messages[0]
    assert {"role": "user", "content": "where is my order?"} in shrunk
    assert not any(m.get("content", "") and "old question" in str(m["content"]) for m in shrunk)
    result = [m for m in shrunk if m.get("tool_call_id") == "c2"][0]["content"]
    assert result.startswith("order data") and "[shortened:" in result
    # every call keeps its result (providers reject a call without one)
    calls = {c["id"] for m in shrunk for c in m.get("tool_calls") or []}
    assert calls == {m["tool_call_id"] for m in shrunk if m["role"] == "tool"}
    assert messages[-1]["content"].endswith("y ")  # the input is not modified


def test_shrink_never_drops_the_system_prompt_or_latest_question_even_if_they_do_not_fit():
    messages = [
        {"role": "system", "content": "rules " * 500},
        {"role": "user", "content": "older"},
        {"role": "assistant", "content": "older answer"},
        {"role": "user", "content": "latest " * 300},
    ]
    shrunk = shrink_to_budget(messages, model=MODEL, budget_tokens=50)
    assert shrunk == [messages[0], messages[-1]]


from switchboard.llm.trimming import surely_within  # noqa: E402

_TOOL = {
    "type": "function",
    "function": {
        "name": "search_knowledge",
        "description": "Search documents.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


@pytest.mark.parametrize(
    "text",
    ["When will my order ship?", "配送はいつですか？" * 40, "🇫🇷👩‍👩‍👧‍👦 " * 30, "x" * 3000, "a b " * 500],
    ids=["english", "japanese", "emoji", "one_long_word", "many_short_words"],
)
def test_surely_within_never_says_yes_to_a_prompt_the_counter_finds_over_budget(text: str) -> None:
    """The no-count fast path of trimming: a "yes" must hold for LiteLLM's own count (tools included)."""
    messages = [
        {"role": "system", "content": "You are the shop's assistant."},
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search_knowledge", "arguments": '{"query": "ship"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": text[:200]},
    ]
    counted = count_tokens("gpt-4o-mini", messages, [_TOOL])
    for budget in range(counted - 5, counted + 20_000, 97):
        if surely_within(messages, [_TOOL], budget):
            assert counted <= budget
    assert surely_within(messages, [_TOOL], counted * 50)  # far below the budget: no count needed
    assert not surely_within(messages, [_TOOL], counted - 1)


def test_surely_within_counts_image_parts() -> None:
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}]
    assert not surely_within(messages, None, 10_000_000)
