"""The tenant's guardrail settings: ``settings_extensions["guardrails"]`` (registered section).

Shape (every key optional)::

    {"input":  {"enabled": true, "threshold": 0.5, "action": "redirect", "on_error": "allow",
                "redirect_reply": "...", "deployments": []},
     "output": {"enabled": true, "safe_reply": "...", "min_leak_words": 12}}
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from switchboard.llm.config import DeploymentSettings
from switchboard.tenant_settings import SettingText, register_section

__all__ = ["InputGuardrailSettings", "OutputGuardrailSettings", "GuardrailSettings"]


class InputGuardrailSettings(BaseModel):
    """The check before the turn (a model call scoring the customer's message)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    """A message scored below this does not reach the agent (0: clearly an attack or off-purpose)."""
    action: Literal["redirect", "handoff"] = "redirect"
    """Below the threshold: ``redirect`` answers ``redirect_reply``; ``handoff`` hands the conversation
    to a person (the customer gets the agent's ``handoff_reply``)."""
    redirect_reply: SettingText = Field(
        "I can only help with questions about our products, orders and services. What can I do for you?",
        min_length=1,
        max_length=1_000,
    )
    on_error: Literal["allow", "block"] = "allow"
    """When the checker fails (every deployment down, output not valid JSON with ``rationale`` and
    ``score``): ``allow`` (fail open, the default: an outage of the checker must not silence customer
    support; logged ``guardrail_failed`` and stored ``decision="error_allowed"``) or ``block`` (fail
    closed: the ``action`` runs, ``decision="error_blocked"``)."""
    deployments: list[DeploymentSettings] = Field(default_factory=list)
    """A dedicated checker model; empty: the tenant's cheapest deployment group (by LiteLLM's cost map;
    unpriced models count as free, ties go to the earlier group)."""
    max_chars: int = Field(4_000, ge=100, le=50_000)
    """The customer's message is cut to this many characters for the checker."""
    timeout_s: float = Field(5.0, gt=0, le=120)
    """Longest wait for the checker, seconds (default 5; never more than what is left of the turn's
    budget). Past it the check counts as failed and ``on_error`` decides: a slow checker costs the
    customer at most this, not the answer's own timeout."""


class OutputGuardrailSettings(BaseModel):
    """The check after the turn (deterministic rules over the reply, no model call)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    safe_reply: SettingText = Field(
        "Sorry, I can't share that. Is there anything else I can help you with?",
        min_length=1,
        max_length=1_000,
    )
    """Replaces a blocked reply (the turn is flagged ``output_replaced``)."""
    min_leak_words: int = Field(12, ge=4, le=200)
    """A run of this many consecutive words of the system prompt in a reply is a leak (unless a tool
    result of the turn carries the same words: a quoted FAQ is not a leak)."""


class GuardrailSettings(BaseModel):
    """Both guardrails of a tenant."""

    model_config = ConfigDict(extra="forbid")

    input: InputGuardrailSettings = Field(default_factory=InputGuardrailSettings)
    output: OutputGuardrailSettings = Field(default_factory=OutputGuardrailSettings)


register_section("guardrails", GuardrailSettings)
