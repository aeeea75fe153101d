"""Per-tenant tool assignments, tool-call receipts, audit logs and security alerts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import String, Text, UniqueConstraint
from sqlmodel import Field

from switchboard.db.models.base import (
    TenantOwned,
    created_at_field,
    id_field,
    jsonb_dict_field,
    updated_at_field,
)


class McpTenantTool(TenantOwned, table=True):
    """Whether a tenant may call one MCP tool, and the ``custom_config`` passed to it as ``tool_config``."""

    __tablename__ = "mcp_tenant_tools"
    __table_args__ = (UniqueConstraint("tenant_id", "tool_name", name="uq_mcp_tenant_tools_tenant_tool"),)

    id: uuid.UUID = id_field()
    tool_name: str = Field(max_length=128)
    enabled: bool = Field(default=True)
    custom_config: dict[str, Any] = jsonb_dict_field()
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()


class ToolReceipt(TenantOwned, table=True):
    """What one tool call did: left for every call, allowed or not."""

    __tablename__ = "tool_receipts"

    id: uuid.UUID = id_field()
    conversation_id: uuid.UUID | None = Field(
        default=None, foreign_key="conversations.id", ondelete="SET NULL"
    )
    trace_id: str | None = Field(default=None, max_length=64, index=True)
    tool_name: str = Field(max_length=128)
    tool_version: str | None = Field(default=None, max_length=32)
    args_hash: str = Field(max_length=64)
    """SHA-256 hex of the canonical JSON arguments (the arguments themselves may hold personal data)."""
    idempotency_key: str | None = Field(default=None, max_length=128, index=True)
    outcome: str = Field(sa_type=String(32))
    """``ok`` | ``error`` | ``rejected`` | ``timeout``."""
    error_type: str | None = Field(default=None, max_length=64)
    rejection_reason: str | None = Field(default=None, sa_type=Text)
    duration_ms: float = Field(default=0.0)
    created_at: datetime = created_at_field()


class AuditLog(TenantOwned, table=True):
    """A state change someone or something made (writes by tools, admin actions, handoffs)."""

    __tablename__ = "audit_logs"

    id: uuid.UUID = id_field()
    actor: str = Field(max_length=128)
    """``model``, ``admin:<name>``, ``agent:<id>``, ``system``."""
    action: str = Field(max_length=128)
    target_type: str | None = Field(default=None, max_length=64)
    target_id: str | None = Field(default=None, max_length=128)
    details: dict[str, Any] = jsonb_dict_field()
    trace_id: str | None = Field(default=None, max_length=64, index=True)
    created_at: datetime = created_at_field()


class SecurityAlert(TenantOwned, table=True):
    """A denied or suspicious action (permission denials, cross-tenant attempts, bad signatures)."""

    __tablename__ = "security_alerts"

    id: uuid.UUID = id_field()
    kind: str = Field(max_length=64)
    severity: str = Field(default="warning", max_length=16)
    details: dict[str, Any] = jsonb_dict_field()
    trace_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = created_at_field()


class UserMemory(TenantOwned, table=True):
    """What was learnt about a customer across conversations, injected under ``<user_history>``."""

    __tablename__ = "user_memories"
    __table_args__ = (UniqueConstraint("tenant_id", "customer_id", name="uq_user_memories_tenant_customer"),)

    id: uuid.UUID = id_field()
    customer_id: uuid.UUID = Field(foreign_key="customers.id", index=True, ondelete="CASCADE")
    summary: str = Field(default="", sa_type=Text)
    """Bounded free-text summary (see the memory job for the bound)."""
    facts: dict[str, Any] = jsonb_dict_field()
    created_at: datetime = created_at_field()
    updated_at: datetime = updated_at_field()
