"""What a guardrail stores on the turn (``turns.guardrails["input"|"output"]``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["Decision", "GuardrailRecord", "GuardrailVerdict"]

Decision = Literal["allow", "block", "error_allowed", "error_blocked"]
"""``allow``/``block``: the checker answered; ``error_*``: it failed and ``on_error`` decided."""


class GuardrailVerdict(BaseModel):
    """The checker model's structured output: the rationale first, then the score."""

    rationale: str = Field(min_length=1, max_length=2_000)
    """Why, in one or two sentences (asked for before the score so the score follows the reasoning)."""
    score: float = Field(ge=0.0, le=1.0)
    """0: clearly a jailbreak, an extraction attempt or off-purpose; 1: a normal request."""
    method: str | None = Field(None, max_length=64)
    """Set by the offline model server's heuristic (``offline_heuristic``); a real model leaves it out."""


class GuardrailRecord(BaseModel):
    """One guardrail's result, stored on the turn and logged (``guardrail_checked``)."""

    stage: Literal["input", "output"]
    checker: str
    """``model`` (a model scored it), ``offline_heuristic`` (the offline server's deterministic
    heuristic answered), ``rules`` (the output guardrail's deterministic rules)."""
    deployment: str | None = None
    """``model_info.id`` of the deployment that answered the input check."""
    rationale: str
    score: float | None = None
    """Input: the checker's score; output: 1.0 (passed) or 0.0 (blocked)."""
    threshold: float | None = None
    decision: Decision
    action: str | None = None
    """What happened because of a block: ``redirect``, ``handoff``, ``replaced``."""
    findings: list[str] = Field(default_factory=list)
    """Output: ``system_prompt_leak``, ``tool_internals``, ``foreign_data``."""
    error: str | None = None
    duration_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    blocked_reply: str | None = None
    """Output: the reply that was replaced (first 2,000 characters; staff-only, never sent)."""

    @property
    def blocked(self) -> bool:
        return self.decision in ("block", "error_blocked")
