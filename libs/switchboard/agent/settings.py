"""Per-tenant agent settings read from ``tenants.settings_extensions`` (DESIGN.md defaults as field defaults).

Shape of ``settings_extensions`` (every key optional; unknown top-level keys belong to other features
and are ignored here)::

    {"agent": {"name": "Sam", "instructions": "...", "system_prompt": null, ...},
     "loop":  {"max_tool_iterations": 5, "turn_timeout_s": 120, ...},
     "llm":   {"deployments": [{"id": "openai-main", "provider": "openai", "model": "gpt-4o-mini",
                                "priority": 1, "api_key_encrypted": "gAAAA..."}], "cooldown_s": 30, ...}}
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from switchboard.llm.config import LLMSettings
from switchboard.observability import get_logger

__all__ = [
    "AgentSettings",
    "LoopLimits",
    "TenantSettings",
    "tenant_settings_from",
    "HandoffSettings",
    "MemorySettings",
    "WhatsAppSettings",
]

log = get_logger(__name__)


class AgentSettings(BaseModel):
    """Who the agent is and what it says when the model cannot."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("Assistant", min_length=1, max_length=80)
    instructions: str = Field(
        "You are a friendly, concise customer-support agent. Answer only from what you know from the "
        "tools and the conversation; when unsure, say so and offer a person.",
        max_length=20_000,
    )
    """Tenant instructions placed in the stable prefix of the system prompt."""
    system_prompt: str | None = Field(None, max_length=50_000)
    """A complete system prompt replacing the built-in template (variable parts are still appended)."""
    handoff_reply: str = "Thank you. A person from our team will take over this conversation shortly."
    """Sent after ``escalate_to_human`` when the model gives no words of its own."""
    farewell_reply: str = "Thank you for contacting us. Goodbye!"
    """Sent after ``end_conversation(farewell=true)`` when the model gives no words of its own."""
    error_reply: str = "Sorry, I can't answer right now. Please try again in a few minutes."
    """Sent when every model failed or the turn ran out of time (the failure is logged and recorded)."""


class LoopLimits(BaseModel):
    """Bounds of the tool loop (DESIGN.md, "The bounded tool loop")."""

    model_config = ConfigDict(extra="forbid")

    max_tool_iterations: int = Field(5, ge=0, le=50)
    """Model calls that may return tool calls; then one final call with ``tools=[]``."""
    turn_timeout_s: float = Field(120.0, gt=0)
    tool_timeout_s: float = Field(60.0, gt=0)
    max_tool_result_chars: int = Field(4_000, ge=100)
    """Tool results are truncated to this many characters before the model sees them."""
    max_raw_tool_result_chars: int = Field(100_000, ge=1_000)
    """Hard ceiling applied to a tool's raw output before any processing."""
    per_tool_call_cap: int = Field(3, ge=1)
    """Calls of one tool per turn; a tool at its cap disappears from the list the model sees."""
    always_on_tools: list[str] = Field(default_factory=lambda: ["escalate_to_human", "end_conversation"])
    """Tools exempt from the per-tool cap."""
    max_tool_calls_per_turn: int = Field(30, ge=1)


class HandoffSettings(BaseModel):
    """Human handoff (DESIGN.md, "Handoff"): ``settings_extensions["handoff"]``."""

    model_config = ConfigDict(extra="forbid")

    queue_reply: str = Field(
        "Everyone on our team is busy right now. A person will answer here as soon as one is available; "
        "you don't need to write again.",
        max_length=1_000,
    )
    """What the customer is told when no agent is online and the conversation waits in the queue."""
    agent_template_name: str | None = Field(None, max_length=512)
    """Approved WhatsApp template used to notify an agent outside their 24-hour window (none: the
    notification is recorded as undeliverable)."""
    agent_template_language: str = Field("en", max_length=16)
    summary_max_chars: int = Field(1_500, ge=100, le=10_000)
    """Bound of the LLM-written handoff summary sent to the agent."""
    button_payloads: list[str] = Field(default_factory=lambda: ["talk_to_human"], max_length=50)
    """Button ids (WhatsApp ``interactive.button_reply.id`` / ``list_reply.id`` or a template quick
    reply's ``button.payload``, compared case-insensitively) that hand the conversation to a person
    at once, without a model turn."""


class MemorySettings(BaseModel):
    """Memory across conversations (DESIGN.md, "Memory"): ``settings_extensions["memory"]``."""

    model_config = ConfigDict(extra="forbid")

    returning_customer_window_days: int = Field(90, ge=1, le=3_650)
    """A customer with a conversation closed within this many days is a returning customer."""
    inactivity_close_s: float = Field(86_400.0, gt=0)
    """An AI-mode conversation without messages for this long is closed (and summarized into memory)."""
    max_chars: int = Field(2_000, ge=200, le=20_000)
    """Bound of ``user_memories.summary``."""


class WhatsAppSettings(BaseModel):
    """WhatsApp-specific behaviour: ``settings_extensions["whatsapp"]``."""

    model_config = ConfigDict(extra="forbid")

    opt_out_payloads: list[str] = Field(default_factory=lambda: ["Unsubscribe", "STOP"], max_length=50)
    """Button payloads (template quick reply ``button.payload`` or an interactive reply id, compared
    case-insensitively) that opt the customer out of marketing/template messages."""
    opt_out_reply: str = Field(
        "You're unsubscribed: we won't send you marketing messages any more. "
        "You can still write to us here whenever you need help.",
        min_length=1,
        max_length=1_000,
    )
    """The one confirmation sent after an opt-out button."""


class TenantSettings(BaseModel):
    """Everything the orchestrator reads from ``settings_extensions``."""

    model_config = ConfigDict(extra="ignore")

    agent: AgentSettings = Field(default_factory=AgentSettings)
    loop: LoopLimits = Field(default_factory=LoopLimits)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    handoff: HandoffSettings = Field(default_factory=HandoffSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    whatsapp: WhatsAppSettings = Field(default_factory=WhatsAppSettings)


def tenant_settings_from(
    extensions: dict[str, Any] | None, *, tenant_id: str | None = None
) -> TenantSettings:
    """Parse a tenant's ``settings_extensions``.

    A section that fails validation is replaced by its defaults and logged as an error
    (``tenant_settings_invalid`` with the section and the first problem), so one bad value never
    stops a tenant's customers from being answered.
    """
    raw = dict(extensions or {})
    sections: dict[str, Any] = {}
    for name, model in (
        ("agent", AgentSettings),
        ("loop", LoopLimits),
        ("llm", LLMSettings),
        ("handoff", HandoffSettings),
        ("memory", MemorySettings),
        ("whatsapp", WhatsAppSettings),
    ):
        value = raw.get(name)
        if value is None:
            continue
        try:
            sections[name] = model.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            log.error(
                "tenant_settings_invalid",
                tenant_id=tenant_id,
                section=name,
                location=".".join(str(p) for p in first.get("loc", ())),
                problem=first.get("msg"),
            )
    return TenantSettings(**sections)
