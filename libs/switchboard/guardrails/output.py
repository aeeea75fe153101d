"""The output guardrail: deterministic rules over the reply, after the turn and before it is stored.

Findings (any one blocks the reply; it is replaced by ``guardrails.output.safe_reply`` and the turn
is flagged ``output_replaced``):

* ``system_prompt_leak``: the reply repeats ``min_leak_words`` (12) consecutive words of the stable
  part of the system prompt (identity, instructions, rules), unless a tool result of the turn carries
  the same words (quoting the FAQ the tenant also pasted into its instructions is no leak).
* ``tool_internals``: the reply names an offered tool (``escalate_to_human``, ``search_knowledge``),
  an injected internal field (``tenant_id``, ``tool_config``, ``idempotency_key``...) or the tool
  error shape (``"retryable"``).
* ``foreign_data``: the reply contains an e-mail address or an international phone number (``+``
  and at least 7 digits) that appears nowhere in what the turn saw (the customer's messages, the
  tool results, the system prompt): data that is not the customer's, or invented.

No model is called: the check costs microseconds and cannot fail open or closed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence

from switchboard.guardrails.records import GuardrailRecord
from switchboard.guardrails.settings import OutputGuardrailSettings

__all__ = ["check_output", "stable_prompt_part"]

STABLE_SEPARATOR = "\n\n---\n"
"""Between the system prompt's stable prefix and its variable part (:func:`build_system_prompt`)."""
BLOCKED_REPLY_MAX_CHARS = 2_000

_WORD = re.compile(r"\w+", re.UNICODE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\+\d[\d\s().-]{5,}\d")
_INTERNALS = re.compile(
    r"\b(tenant_id|tool_config|custom_config|idempotency_key|tool_call_id|capability token|"
    r"function_call|tool_calls)\b|\"retryable\"",
    re.IGNORECASE,
)


def stable_prompt_part(system_prompt: str) -> str:
    """The system prompt before its variable part (date, customer blocks)."""
    return system_prompt.split(STABLE_SEPARATOR, 1)[0]


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _shingles(words: Sequence[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def check_output(
    reply: str,
    *,
    settings: OutputGuardrailSettings,
    system_prompt: str,
    tool_names: Iterable[str],
    seen_texts: Iterable[str],
    tool_results: Iterable[str],
) -> GuardrailRecord:
    """Check ``reply`` (module docstring).

    Args:
        system_prompt: the turn's system message.
        tool_names: the tools offered in the turn.
        seen_texts: everything the turn saw besides tool results (the customer's and earlier
            messages).
        tool_results: the tool results of the turn (their words may be quoted).
    """
    started = time.perf_counter()
    results = list(tool_results)
    seen = "\n".join([system_prompt, *seen_texts, *results])
    findings: list[str] = []
    reasons: list[str] = []

    size = settings.min_leak_words
    reply_words = _words(reply)
    leaked = _shingles(reply_words, size) & _shingles(_words(stable_prompt_part(system_prompt)), size)
    if leaked:
        leaked -= set().union(*(_shingles(_words(r), size) for r in results)) if results else set()
    if leaked:
        findings.append("system_prompt_leak")
        reasons.append(f"it repeats {size}+ consecutive words of the system prompt")

    named = sorted({n for n in tool_names if re.search(rf"\b{re.escape(n)}\b", reply)})
    internal = _INTERNALS.search(reply)
    if named or internal:
        findings.append("tool_internals")
        what = [f"tool {n}" for n in named] + ([repr(internal.group(0))] if internal else [])
        reasons.append("it names " + ", ".join(what))

    seen_lower = seen.lower()
    seen_digits = {_digits(m) for m in _PHONE.findall(seen)}
    foreign = [m for m in _EMAIL.findall(reply) if m.lower() not in seen_lower]
    foreign += [m for m in _PHONE.findall(reply) if _digits(m) not in seen_digits and len(_digits(m)) >= 7]
    if foreign:
        findings.append("foreign_data")
        reasons.append(f"it contains {len(foreign)} contact detail(s) the conversation never showed")

    blocked = bool(findings)
    return GuardrailRecord(
        stage="output",
        checker="rules",
        rationale=("Blocked: " + "; ".join(reasons) + ".") if blocked else "No leak or foreign data found.",
        score=0.0 if blocked else 1.0,
        decision="block" if blocked else "allow",
        action="replaced" if blocked else None,
        findings=findings,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        blocked_reply=reply[:BLOCKED_REPLY_MAX_CHARS] if blocked else None,
    )
