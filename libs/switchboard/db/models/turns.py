"""Turns: one row per inbound message the orchestrator answered (idempotency, audit and timings)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import CheckConstraint, Float, Index, String, Text, UniqueConstraint
from sqlmodel import Field

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    jsonb_dict_field,
    jsonb_optional_field,
    optional_time_field,
    updated_at_field,
)


class TurnStatus(StrEnum):
    running = "running"  # claimed by an orchestrator process, not finished
    done = "done"  # ``result`` holds the TurnResult returned (and returned again on repeats)


class Turn(TenantOwned, table=True):
    """The orchestrator's answer to one inbound message.

    Unique on ``inbound_message_id``: a repeated ``TurnRequest`` returns ``result`` without calling a
    model again.
    """

    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("inbound_message_id", name="uq_turns_inbound_message"),
        CheckConstraint("status IN ('running', 'done')", name="ck_turns_status"),
        Index("ix_turns_conversation_created", "conversation_id", "created_at"),
        Index("ix_turns_tenant_created", "tenant_id", "created_at"),
    )

    id: uuid.UUID = id_field()
    conversation_id: uuid.UUID = Field(foreign_key="conversations.id", ondelete="CASCADE")
    inbound_message_id: uuid.UUID
    trace_id: str = Field(max_length=64, index=True)
    status: str = Field(default=TurnStatus.running.value, sa_type=String(16))
    outcome: str | None = Field(default=None, max_length=16)
    """``answered`` | ``silent`` | ``degraded`` (fallback text after a timeout or model failure) | ``skipped``."""
    result: dict[str, Any] | None = jsonb_optional_field()
    """The ``TurnResult`` JSON returned to the caller."""
    model: str | None = Field(default=None, max_length=64)
    """``model_info.id`` of the deployment that answered last."""
    fallback_used: bool = Field(default=False)
    usage: dict[str, Any] = jsonb_dict_field()
    """``{"prompt_tokens", "completion_tokens", "total_tokens"}``."""
    timings: dict[str, Any] = jsonb_dict_field()
    """``{"total_ms", "model_ms", "tool_ms", "guardrail_model_ms", "harness_ms", "model_calls",
    "tool_iterations", ...}`` (milliseconds; ``harness_ms`` is the total minus model, input-guardrail
    model and tool time)."""
    error: str | None = Field(default=None, sa_type=Text)
    guardrails: dict[str, Any] = jsonb_dict_field()
    """``{"input": GuardrailRecord, "output": GuardrailRecord}`` (:mod:`switchboard.guardrails.records`);
    a stage that was off or did not run is absent."""
    cost_usd: float = Field(default=0.0, sa_type=Float, sa_column_kwargs={"server_default": "0"})
    """Model spend of the turn in USD (LiteLLM's cost map; unpriced models count 0, see
    ``usage["unpriced_calls"]``), guardrail calls included. Budgets sum it per calendar month."""
    summary_text: str | None = Field(default=None, sa_type=Text)
    """Summary of the conversation's older messages made during this turn (when history grew long)."""
    summary_through_message_id: uuid.UUID | None = Field(default=None)
    """Last message the summary covers; later turns load only messages after it verbatim."""
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()
    finished_at: datetime | None = optional_time_field()
