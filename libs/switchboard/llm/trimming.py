"""Fitting a conversation into a model's context window, and cleaning what models write.

Messages are OpenAI chat dicts. A *unit* is what must stay together: one user message, one plain
assistant message, or an assistant message with ``tool_calls`` plus every ``tool`` message answering
it. Trimming drops whole units, oldest first, and never the leading system message(s) or the newest
unit (the current question), so a tool call is never separated from its result.

``litellm.utils.trim_messages`` is not used: it keeps only trailing tool messages and does not keep
call/result pairs together.
"""

from __future__ import annotations

import json
import re
from typing import Any

from switchboard.llm import import_litellm
from switchboard.observability import get_logger

__all__ = [
    "strip_reasoning",
    "split_units",
    "count_tokens",
    "surely_within",
    "trim_to_budget",
    "strip_tool_history",
    "repair_tool_pairs",
    "shrink_to_budget",
    "stated_context_limit",
]

log = get_logger(__name__)

Message = dict[str, Any]

_REASONING_TAGS = ("thinking", "think", "reasoning", "reflection", "scratchpad", "analysis")
_CLOSED_RE = re.compile(
    r"<\s*(" + "|".join(_REASONING_TAGS) + r")\b[^>]*>.*?<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL
)
_OPEN_RE = re.compile(r"<\s*(" + "|".join(_REASONING_TAGS) + r")\b[^>]*>.*\Z", re.IGNORECASE | re.DOTALL)
_STRAY_CLOSE_RE = re.compile(r"<\s*/\s*(" + "|".join(_REASONING_TAGS) + r")\s*>", re.IGNORECASE)


def strip_reasoning(text: str | None) -> str:
    """Remove ``<thinking>…</thinking>`` and similar reasoning blocks (think, reasoning, reflection,
    scratchpad, analysis), an unclosed opening tag with everything after it, and stray closing tags.

    Returns:
        The visible text, stripped of surrounding whitespace ("" when nothing visible remains).
    """
    if not text:
        return ""
    cleaned = _CLOSED_RE.sub("", text)
    cleaned = _OPEN_RE.sub("", cleaned)
    cleaned = _STRAY_CLOSE_RE.sub("", cleaned)
    return re.sub(r"\n{3,}", "\n\n", cleaned).strip()


def split_units(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Split into (leading system messages, units). See the module docstring for units."""
    head: list[Message] = []
    index = 0
    while index < len(messages) and messages[index].get("role") == "system":
        head.append(messages[index])
        index += 1
    units: list[list[Message]] = []
    while index < len(messages):
        message = messages[index]
        unit = [message]
        index += 1
        if message.get("role") == "assistant" and message.get("tool_calls"):
            while index < len(messages) and messages[index].get("role") == "tool":
                unit.append(messages[index])
                index += 1
        units.append(unit)
    return head, units


def count_tokens(model: str, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
    """Token count with LiteLLM's counter (tiktoken for unknown models); ~4 chars/token if it fails."""
    try:
        return int(import_litellm().token_counter(model=model, messages=messages, tools=tools or None))
    except Exception:  # the counter rejects exotic shapes; an estimate is enough for trimming
        return len(json.dumps(messages, ensure_ascii=False)) // 4 + len(json.dumps(tools or [])) // 4


_TOKENS_PER_MESSAGE_BOUND = 8
"""More than the per-message tokens LiteLLM's counter adds (OpenAI's framing: 3-4 per message)."""
_FIXED_TOKENS_BOUND = 64
"""More than the tokens the counter adds once (reply priming, the tool list's framing)."""


def surely_within(messages: list[Message], tools: list[dict[str, Any]] | None, budget_tokens: int) -> bool:
    """Whether ``messages`` (with ``tools``) fit in ``budget_tokens`` for certain, without counting.

    Every token of a BPE tokenizer is at least one byte, so the UTF-8 length of the JSON text (which
    holds every content, name and argument, plus quotes and keys) bounds the tokens of the text; the
    framing is bounded by the constants above. Only for text contents (an image part counts by its
    size, not its URL's): ``False`` otherwise, and then the caller counts.
    """
    if any(not isinstance(m.get("content"), str | None) for m in messages):
        return False
    size = len(json.dumps(messages, ensure_ascii=False).encode()) + len(json.dumps(tools or []).encode())
    return size + _TOKENS_PER_MESSAGE_BOUND * len(messages) + _FIXED_TOKENS_BOUND <= budget_tokens


def trim_to_budget(
    messages: list[Message],
    *,
    model: str,
    budget_tokens: int,
    tools: list[dict[str, Any]] | None = None,
    keep_last_units: int = 1,
) -> list[Message]:
    """Drop the oldest units until ``messages`` (with ``tools``) fit in ``budget_tokens``.

    Args:
        messages: OpenAI chat messages, system message(s) first.
        model: LiteLLM model name used for counting.
        budget_tokens: e.g. 80% of the context window.
        tools: tool definitions sent with the call (they count against the budget).
        keep_last_units: newest units never dropped (the current question and this turn's tool
            exchanges); if they alone exceed the budget they are still sent, and a provider
            overflow error is handled by the caller.

    Returns:
        A new list: the system message(s) and the newest units that fit.
    """
    # a prompt far below the budget (most turns) is not tokenized at all: counting costs a few ms
    if surely_within(messages, tools, budget_tokens) or count_tokens(model, messages, tools) <= budget_tokens:
        return list(messages)
    head, units = split_units(messages)
    fixed = count_tokens(model, head, tools)
    unit_tokens = [count_tokens(model, unit) for unit in units]
    kept: list[list[Message]] = []
    used = fixed
    for position in range(len(units) - 1, -1, -1):
        protected = position >= len(units) - keep_last_units
        if protected or used + unit_tokens[position] <= budget_tokens:
            kept.append(units[position])
            used += unit_tokens[position]
        else:
            break  # oldest-first dropping: once a unit does not fit, everything older goes too
    kept.reverse()
    dropped = len(units) - len(kept)
    log.info("messages_trimmed", dropped_units=dropped, kept_units=len(kept), budget_tokens=budget_tokens)
    return head + [message for unit in kept for message in unit]


def _shrink_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n…[shortened: {len(text) - limit} characters left out to fit the context window]"
    return text[: max(0, limit - len(marker))] + marker


def shrink_to_budget(
    messages: list[Message],
    *,
    model: str,
    budget_tokens: int,
    tools: list[dict[str, Any]] | None = None,
    min_tool_result_chars: int = 400,
) -> list[Message]:
    """Shrink ``messages`` until they fit ``budget_tokens`` (the recovery after a context overflow).

    In this order, stopping as soon as the prompt fits:

    1. drop older units (before the latest user message), oldest first (:func:`trim_to_budget`);
    2. drop every older unit, then shorten the current turn's tool results (largest first, halving,
       down to ``min_tool_result_chars`` each, marked ``…[shortened: N characters …]``);
    3. drop the current turn's earlier tool exchanges, keeping the newest one.

    The leading system message(s) and the latest user message always stay, unchanged; a call is
    never separated from its results. If they alone exceed the budget the result still holds them
    (the caller decides what to do with a prompt that cannot fit).

    Returns:
        A new list (the input is not modified).
    """
    head, units = split_units(messages)
    last_user = max((i for i, u in enumerate(units) if u[0].get("role") == "user"), default=len(units) - 1)
    current = max(1, len(units) - max(last_user, 0))
    trimmed = trim_to_budget(
        messages, model=model, budget_tokens=budget_tokens, tools=tools, keep_last_units=current
    )
    if count_tokens(model, trimmed, tools) <= budget_tokens:
        return trimmed
    kept_units = [[dict(m) for m in unit] for unit in units[len(units) - current :]]
    shrunk = head + [m for unit in kept_units for m in unit]
    results = [m for unit in kept_units for m in unit if m.get("role") == "tool"]
    while count_tokens(model, shrunk, tools) > budget_tokens:
        longest = max(results, key=lambda m: len(str(m.get("content") or "")), default=None)
        if longest is None or len(str(longest.get("content") or "")) <= min_tool_result_chars:
            break
        text = str(longest.get("content") or "")
        longest["content"] = _shrink_text(text, max(min_tool_result_chars, len(text) // 2))
    exchanges = [
        i
        for i, unit in enumerate(kept_units)
        if unit[0].get("role") == "assistant" and unit[0].get("tool_calls")
    ]
    while count_tokens(model, shrunk, tools) > budget_tokens and len(exchanges) > 1:
        kept_units.pop(exchanges.pop(0))
        exchanges = [i - 1 for i in exchanges]
        shrunk = head + [m for unit in kept_units for m in unit]
    log.info(
        "messages_shrunk",
        budget_tokens=budget_tokens,
        kept_messages=len(shrunk),
        fits=count_tokens(model, shrunk, tools) <= budget_tokens,
    )
    return shrunk


def strip_tool_history(messages: list[Message]) -> list[Message]:
    """Remove tool calls and tool results before the last user message (the overflow retry).

    Assistant messages that carried both text and tool calls keep their text. The current
    question's own tool exchange (after the last user message) stays.
    """
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    result: list[Message] = []
    for index, message in enumerate(messages):
        if index < last_user:
            if message.get("role") == "tool":
                continue
            if message.get("role") == "assistant" and message.get("tool_calls"):
                if message.get("content"):
                    result.append({"role": "assistant", "content": message["content"]})
                continue
        result.append(message)
    return result


def repair_tool_pairs(messages: list[Message]) -> list[Message]:
    """Drop tool results without their call and tool calls without all their results.

    Providers reject such histories (a result must follow its call); they arise when a turn was cut
    off mid-way or history was edited.
    """
    result: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.get("role") == "tool":
            index += 1  # orphan result
            continue
        if message.get("role") == "assistant" and message.get("tool_calls"):
            answers: list[Message] = []
            probe = index + 1
            while probe < len(messages) and messages[probe].get("role") == "tool":
                answers.append(messages[probe])
                probe += 1
            wanted = {call.get("id") for call in message["tool_calls"]}
            got = {answer.get("tool_call_id") for answer in answers}
            if wanted and wanted <= got:
                result.append(message)
                result.extend(answer for answer in answers if answer.get("tool_call_id") in wanted)
            elif message.get("content"):
                result.append({"role": "assistant", "content": message["content"]})
            index = probe
            continue
        result.append(message)
        index += 1
    return result


_LIMIT_PATTERNS = (
    # OpenAI / OpenAI-compatible (vLLM, Ollama's OpenAI API, LiteLLM's own wording)
    re.compile(r"maximum context length is\s*([\d,_]+)\s*tokens", re.IGNORECASE),
    re.compile(r"context length of\s*(?:only\s*)?([\d,_]+)\s*tokens", re.IGNORECASE),
    re.compile(r"context(?:\s+window)?\s+(?:limit|size|window)\s+(?:is|of)\s*([\d,_]+)", re.IGNORECASE),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"tokens\s*>\s*([\d,_]+)\s*maximum", re.IGNORECASE),
    # "input length (9000) exceeds the model's context length (8192)"
    re.compile(
        r"exceeds? (?:the )?(?:model's )?(?:maximum )?context (?:length|window)\s*\(?\s*(?:of\s*)?([\d,_]+)",
        re.IGNORECASE,
    ),
)


def stated_context_limit(error_text: str) -> int | None:
    """The context window (tokens) a provider's overflow error states, or ``None`` when it states none.

    Recognises OpenAI's "maximum context length is N tokens", Anthropic's "N tokens > M maximum",
    and the "context length of N" / "exceeds the context window (N)" wordings of OpenAI-compatible
    servers (vLLM, llama.cpp, LiteLLM). Values below 256 are ignored (not a context window).
    """
    for pattern in _LIMIT_PATTERNS:
        match = pattern.search(error_text)
        if match:
            value = int(re.sub(r"[,_]", "", match.group(1)))
            if value >= 256:
                return value
    return None
