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
