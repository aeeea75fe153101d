"""The offline model's guardrail behaviour: a deterministic heuristic, and it says so.

The input guardrail (:mod:`switchboard.guardrails.input`) asks a model for ``{"rationale", "score"}``;
its system prompt starts with :data:`GUARDRAIL_INSTRUCTION_MARKER`. The offline server's demo mode
answers such a request with :func:`heuristic_verdict` of the customer's message: regular expressions
for jailbreaks, system-prompt extraction and requests off a support desk's purpose. Its rationale
starts with ``[offline heuristic]`` and ``method`` is ``offline_heuristic``, which the guardrail stores
as its checker, so nobody mistakes it for a model's judgement.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "GUARDRAIL_INSTRUCTION_MARKER",
    "HEURISTIC_METHOD",
    "INTENT_INSTRUCTION_MARKER",
    "INTENTS",
    "heuristic_intent",
    "heuristic_verdict",
]

GUARDRAIL_INSTRUCTION_MARKER = "You screen messages sent to a customer-support assistant"
"""Start of the input guardrail's system prompt."""
HEURISTIC_METHOD = "offline_heuristic"
INTENT_INSTRUCTION_MARKER = "Classify the customer's message into one intent"
"""Start of the evaluation baseline's intent-classification prompt (:mod:`switchboard.evals.pipeline`)."""
INTENTS = ("knowledge", "product", "order", "store", "handoff", "other")

_JAILBREAK = re.compile(
    r"ignore (all |any |the |your )?(previous |prior |above |earlier )?(instructions|rules|prompts?)"
    r"|disregard (all |your |the )?(previous |prior )?(instructions|rules)"
    r"|\bDAN\b|do anything now|developer mode|jailbr[eo]a?k|no (rules|restrictions|filters|limits)"
    r"|pretend (you are|to be|you're)|act as (an? )?(unfiltered|uncensored|evil)|you are no longer"
    r"|forget (all |your )?(previous |prior )?(instructions|rules)|bypass (your )?(safety|rules|filters)",
    re.IGNORECASE,
)
_EXTRACTION = re.compile(
    r"system prompt|(initial|original|hidden|secret) (prompt|instructions)"
    r"|(reveal|show|print|repeat|tell me|give me|output|list) (me )?(all )?(your|the) "
    r"(instructions|rules|prompt|configuration|tools|tool definitions|functions)"
    r"|(repeat|print) (the )?(text|everything|words) (above|before)|what (were|are) you told"
    r"|tool (definitions|schemas?)|(your|the) (json )?schema",
    re.IGNORECASE,
)
_OFF_PURPOSE = re.compile(
    r"(write|compose|generate) (me )?(a |an )?(poem|essay|story|song|novel|limerick|cover letter|code|program"
    r"|script|function)|(python|javascript|sql|java|c\+\+) (code|script|program|function)"
    r"|my homework|solve (this|the) (equation|math|problem)|translate (this|the following)"
    r"|capital of|who won the|stock (tips|picks)|bitcoin price|recipe for|tell me a joke",
    re.IGNORECASE,
)


def heuristic_verdict(text: str) -> dict[str, Any]:
    """``{"rationale", "score", "method"}`` for one customer message (deterministic).

    Scores: 0.05 a jailbreak, 0.1 a system-prompt or tool extraction attempt, 0.2 a request off a
    support desk's purpose, 0.9 anything else.
    """
    for pattern, score, what in (
        (_JAILBREAK, 0.05, "a jailbreak attempt (asks the assistant to drop its rules or role)"),
        (_EXTRACTION, 0.1, "an attempt to extract the system prompt or tool internals"),
        (_OFF_PURPOSE, 0.2, "a request off the purpose of a customer-support desk"),
    ):
        match = pattern.search(text)
        if match:
            return {
                "rationale": f"[offline heuristic] The message looks like {what}: it contains "
                f"{match.group(0)!r}.",
                "score": score,
                "method": HEURISTIC_METHOD,
            }
    return {
        "rationale": "[offline heuristic] No jailbreak, extraction or off-purpose pattern matched.",
        "score": 0.9,
        "method": HEURISTIC_METHOD,
    }


_HANDOFF_INTENT = re.compile(r"\b(human|person|agent|representative|someone real|operator)\b", re.IGNORECASE)
_ORDER_INTENT = re.compile(
    r"\border\b.*\b[A-Z]{1,4}-\d{2,}\b|\b[A-Z]{1,4}-\d{3,}\b.*\border\b", re.IGNORECASE
)
_STORE_INTENT = re.compile(r"\b(stores?|shops?|branch|address|located|near me)\b", re.IGNORECASE)
_PRODUCT_INTENT = re.compile(
    r"\b(price|cost|how much|in stock|stock|sku)\b|\b[A-Z]{2,5}-\d{2,4}(-[A-Z])?\b", re.IGNORECASE
)


def heuristic_intent(text: str) -> dict[str, Any]:
    """``{"intent", "method"}`` for one message by keywords (deterministic), checked in the order
    handoff, order, store, product; anything else is ``knowledge``."""
    for pattern, intent in (
        (_HANDOFF_INTENT, "handoff"),
        (_ORDER_INTENT, "order"),
        (_STORE_INTENT, "store"),
        (_PRODUCT_INTENT, "product"),
    ):
        if pattern.search(text):
            return {"intent": intent, "method": HEURISTIC_METHOD}
    return {"intent": "knowledge", "method": HEURISTIC_METHOD}
