"""How much of consecutive model requests is an identical prefix (what provider prompt caching reuses).

OpenAI caches the longest previously seen prefix of a request of at least 1,024 tokens (tools first,
then the messages in order); Anthropic caches up to its cache breakpoints. The orchestrator keeps the
system prompt's stable part (identity, instructions, rules), then the tool definitions, identical from
turn to turn, with the variable part (date, customer blocks) after them (:mod:`switchboard.agent.prompt`).
:func:`prefix_report` measures it on the requests a provider (here the offline server) received.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from switchboard.llm import import_litellm

__all__ = ["PrefixReport", "prefix_report", "serialize_request"]

STABLE_SEPARATOR = "\n\n---\n"
"""Where the system prompt's variable part starts (:func:`switchboard.agent.prompt.build_system_prompt`)."""


def serialize_request(body: dict[str, Any]) -> str:
    """The request as the provider reads it for caching: tool definitions first, then the messages."""
    return json.dumps(
        {"tools": body.get("tools") or [], "messages": body.get("messages") or []}, ensure_ascii=False
    )


def _stable_block(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    system = str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""
    return json.dumps(body.get("tools") or [], ensure_ascii=False) + system.split(STABLE_SEPARATOR, 1)[0]


@dataclass(frozen=True)
class PrefixReport:
    """Prefix figures of a set of requests."""

    requests: int
    stable_block_identical: bool
    """Tool definitions plus the stable part of the system prompt are the same in every request."""
    stable_block_tokens: int
    """Tokens of that block (``gpt-4o-mini`` tokenizer): below 1,024 OpenAI caches nothing."""
    consecutive_pairs: int
    mean_shared_prefix_share: float
    """Mean over consecutive requests of one conversation: the share (0..1) of the later request's
    characters that are an identical prefix of the earlier one's."""
    min_shared_prefix_share: float
    cross_conversation_shared_chars: int
    """Identical prefix of the first requests of different conversations (the tenant-wide cacheable part)."""


def _common(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def prefix_report(conversations: Sequence[Sequence[dict[str, Any]]]) -> PrefixReport:
    """Measure request bodies grouped by conversation, each group in the order sent."""
    bodies = [b for group in conversations for b in group]
    blocks = {_stable_block(b) for b in bodies}
    shares = []
    for group in conversations:
        texts = [serialize_request(b) for b in group]
        shares += [_common(a, b) / len(b) for a, b in zip(texts, texts[1:], strict=False) if b]
    firsts = [serialize_request(group[0]) for group in conversations if group]
    cross = min((_common(firsts[0], other) for other in firsts[1:]), default=len(firsts[0]) if firsts else 0)
    block = next(iter(blocks)) if blocks else ""
    tokens = int(import_litellm().token_counter(model="gpt-4o-mini", text=block)) if block else 0
    return PrefixReport(
        requests=len(bodies),
        stable_block_identical=len(blocks) == 1,
        stable_block_tokens=tokens,
        consecutive_pairs=len(shares),
        mean_shared_prefix_share=round(sum(shares) / len(shares), 4) if shares else 0.0,
        min_shared_prefix_share=round(min(shares), 4) if shares else 0.0,
        cross_conversation_shared_chars=cross,
    )
