"""Per-tenant cost budget and feedback-app settings: ``settings_extensions["budget"]`` and ``["feedback"]``.

Shape (every key optional)::

    {"budget":   {"monthly_usd": 50.0, "warn_ratio": 0.8, "action": "cheaper_group",
                  "holding_reply": "..."},
     "feedback": {"app_key_sha256": "<hex>"}}
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from switchboard.tenant_settings import SettingText, register_section

__all__ = ["BudgetSettings", "FeedbackSettings"]


class BudgetSettings(BaseModel):
    """A monthly model-spend budget (USD, LiteLLM's cost map; the calendar month in UTC)."""

    model_config = ConfigDict(extra="forbid")

    monthly_usd: float | None = Field(None, ge=0)
    """Budget for the month; ``None``: no budget (spend is still recorded on every turn)."""
    warn_ratio: float = Field(0.8, gt=0, le=1)
    """Past this share of ``monthly_usd`` every turn logs ``budget_warning``."""
    action: Literal["cheaper_group", "handoff"] = "cheaper_group"
    """Past the budget: ``cheaper_group`` answers through the tenant's cheapest deployment group only;
    ``handoff`` calls no model, sends ``holding_reply`` and hands the conversation to a person."""
    holding_reply: SettingText = Field(
        "Thanks for your message. A person from our team will get back to you here shortly.",
        min_length=1,
        max_length=1_000,
    )


class FeedbackSettings(BaseModel):
    """How a tenant's own app authenticates ``POST /v1/messages/{id}/feedback``."""

    model_config = ConfigDict(extra="forbid")

    app_key_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    """SHA-256 (hex) of the tenant's feedback app key (``switchboard feedback issue-key``); the key
    itself is shown once and never stored."""


register_section("budget", BudgetSettings)
register_section("feedback", FeedbackSettings)
